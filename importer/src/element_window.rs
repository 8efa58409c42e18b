//! `pl.Element` block dims: `window_kind = #tpu.element_window<[lo…], [hi…]>` in a window's
//! params says its index map returns element offsets (into the array padded by `lo` before
//! and `hi` after each dim) rather than block indices.
//!
//! Imported as [`BlockDim::Element`] windows whose index map has the padding subtracted, so
//! the window starts at the element the map names in the array's own coordinates. Pallas
//! leaves what a kernel reads in the padding undefined: past the end, tpukit's windows read
//! the fill (and drop writes), as for any edge block; before the start (an offset below
//! `lo`), the window would start outside the array, which the runtime refuses with an error
//! naming the index map, never shifting the rows.

use super::text;
use tpukit_dsl::{BlockDim, Error, ErrorKind, IndexExpr, Result};

/// The low padding per dim of a window whose params `entry` (one printed `{…}` of
/// `window_params`) carry an element `window_kind`; `None` for a blocked window.
pub fn low_padding(entry: &str, rank: usize) -> Result<Option<Vec<i64>>> {
    let Some(at) = entry.find("window_kind = ") else {
        return Ok(None);
    };
    let rest = &entry[at + "window_kind = ".len()..];
    let Some(inner) = rest.strip_prefix("#tpu.element_window<") else {
        let kind = rest.split([',', '}']).next().unwrap_or(rest);
        return Err(Error::new(format!("window kind `{kind}` is not imported"))
            .with_kind(ErrorKind::Unsupported));
    };
    let inner = &inner[..inner.find('>').unwrap_or(inner.len())];
    let (lo, hi) = inner
        .split_once("],")
        .map(|(lo, hi)| (format!("{lo}]"), hi.trim().to_string()))
        .ok_or_else(|| Error::new(format!("cannot read the element window `{inner}`")))?;
    let (lo, hi) = (text::int_list(&lo)?, text::int_list(&hi)?);
    if lo.len() != rank || hi.len() != rank || lo.iter().chain(&hi).any(|&p| p < 0) {
        return Err(Error::new(format!(
            "element window padding {lo:?}, {hi:?} for a rank-{rank} array"
        )));
    }
    Ok(Some(lo))
}

/// The block dims and index map of an element window: `bounds` elements per dim, starting
/// at what `map` returns minus the low padding.
pub fn element_dims(
    bounds: &[usize],
    map: Vec<IndexExpr>,
    low: &[i64],
) -> (Vec<BlockDim>, Vec<IndexExpr>) {
    let dims = bounds.iter().map(|&n| BlockDim::Element(n)).collect();
    let map = map
        .into_iter()
        .zip(low)
        .map(|(e, &lo)| if lo == 0 { e } else { e - IndexExpr::Const(lo) })
        .collect();
    (dims, map)
}
