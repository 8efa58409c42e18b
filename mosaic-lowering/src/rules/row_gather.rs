//! A load that fixes one row of every (sublane) tile — a point index on a buffer's
//! second-minor dimension under whole-extent slices, as `ref[:, :, h, :]` of a
//! `(pages, page_size, heads, lanes)` buffer — read as Pallas reads it: the buffer viewed as
//! rows (`tpu.memref_reshape`, the dimensions from the first sliced one to the second-minor
//! collapsed) and one `tpu.strided_load` stepping over the second-minor extent.
//!
//! Loaded as written (a `vector.load` of `(…, n, 1, lanes)` then a shape cast), Mosaic keeps
//! each row at its sublane and packs them into vregs with a rotate and a select per row
//! (ragged paged attention's keys and values, which the importer reads through such
//! indices: twice Pallas's LLO ops); a strided load gathers eight rows per vreg load.

/// How a load reads as a strided load of rows. Invariants: `first < second_minor`, the
/// dimensions before `first` are read at one index, those strictly between `first` and
/// `second_minor` whole, the last whole.
#[derive(Debug, PartialEq)]
pub struct RowGather {
    /// The first collapsed dimension: the outermost one read at more than one index (or the
    /// one above the second-minor, when only that one is).
    pub first: usize,
    /// The number of rows of the collapsed view (the product of the collapsed extents).
    pub rows: usize,
    /// The rows between two rows read: the second-minor extent.
    pub stride: usize,
    /// The rows read.
    pub count: usize,
    /// The rows of the view per step of dimension `first`'s index.
    pub rows_per_first: usize,
}

/// The strided reading of a load of `sizes` at `starts` (static starts as `Some`; `None` for a
/// dynamic one) from a buffer of `extents` (32-bit data, stride 1 everywhere), if it reads
/// one row of each second-minor tile over at least two tiles and the buffer is tiled by
/// whole (8, 128) tiles.
pub fn plan(starts: &[Option<usize>], sizes: &[usize], extents: &[usize]) -> Option<RowGather> {
    let n = extents.len();
    if n < 3 {
        return None;
    }
    let (second_minor, minor) = (n - 2, n - 1);
    let whole = |d: usize| starts[d] == Some(0) && sizes[d] == extents[d];
    let tiled = extents[second_minor].is_multiple_of(8) && extents[minor].is_multiple_of(128);
    if sizes[second_minor] != 1 || extents[second_minor] < 8 || !tiled || !whole(minor) {
        return None;
    }
    let mut first = (0..second_minor).rev().find(|&d| !whole(d)).unwrap_or(0);
    if sizes[..first].iter().any(|&s| s != 1) {
        return None;
    }
    // Collapse no more than needed: a leading dimension read at one index stays.
    while first + 1 < second_minor && sizes[first] == 1 {
        first += 1;
    }
    let inner: usize = extents[first + 1..second_minor].iter().product();
    let count = sizes[first] * inner;
    (count >= 2).then(|| RowGather {
        first,
        rows: extents[first..=second_minor].iter().product(),
        stride: extents[second_minor],
        count,
        rows_per_first: inner * extents[second_minor],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_of_every_page_row_is_a_strided_read() {
        // buffer[b, :, :, h, :] of a (2, 8, 16, 8, 128) buffer: 128 rows, every 8th.
        let extents = [2, 8, 16, 8, 128];
        let g = plan(
            &[None, Some(0), Some(0), None, Some(0)],
            &[1, 8, 16, 1, 128],
            &extents,
        );
        assert_eq!(
            g,
            Some(RowGather {
                first: 1,
                rows: 1024,
                stride: 8,
                count: 128,
                rows_per_first: 128,
            })
        );
        // Part of the pages (a dynamic start): still one run of rows.
        let g = plan(
            &[None, None, Some(0), Some(3), Some(0)],
            &[1, 2, 16, 1, 128],
            &extents,
        );
        assert_eq!(g.map(|g| (g.first, g.count)), Some((1, 32)));
    }

    #[test]
    fn other_reads_stay_plain_loads() {
        let extents = [2, 8, 16, 8, 128];
        // Part of an inner dimension: the rows read are not evenly spaced.
        assert_eq!(
            plan(
                &[Some(0), Some(0), Some(0), Some(1), Some(0)],
                &[1, 8, 8, 1, 128],
                &extents
            ),
            None
        );
        // Two rows of each tile, part of the lanes, an untiled second-minor extent.
        let starts = [Some(0), Some(0), Some(0), Some(0), Some(0)];
        assert_eq!(plan(&starts, &[1, 8, 16, 2, 128], &extents), None);
        assert_eq!(plan(&starts, &[1, 8, 16, 1, 64], &extents), None);
        assert_eq!(plan(&starts[1..], &[8, 1, 128], &[8, 4, 128]), None);
        // One row only.
        assert_eq!(plan(&starts[2..], &[1, 1, 128], &[16, 8, 128]), None);
    }
}
