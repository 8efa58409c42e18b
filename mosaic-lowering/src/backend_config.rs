//! The custom call's `backend_config`: JSON written by hand in exactly the key order and
//! spacing of JAX's `CustomCallBackendConfig.to_json()` (jax 0.10.2, plain `pallas_call`).

/// `{"custom_call_config": {"body": …, "serialization_format": 1, "needs_layout_passes": true}}`
///
/// `needs_layout_passes` is always true for TensorCore kernels: libtpu runs Mosaic's layout
/// passes at compile time, which is what lets a CPU-only host produce the kernel.
///
/// `semaphores` are the custom call's results that are semaphores (of `outputs` results):
/// JAX colors them as living in semaphore memory (`output_memory_space_colors`, color 2),
/// with a `shape_index` when the call has more than one result.
pub fn backend_config(body_base64: &str, semaphores: &[usize], outputs: usize) -> String {
    let colors: Vec<String> = semaphores
        .iter()
        .map(|i| {
            if outputs > 1 {
                format!("{{\"color\":2,\"shape_index\":[{i}]}}")
            } else {
                "{\"color\":2}".to_string()
            }
        })
        .collect();
    let colors = if colors.is_empty() {
        String::new()
    } else {
        format!(", \"output_memory_space_colors\": [{}]", colors.join(","))
    };
    format!(
        "{{\"custom_call_config\": {{\"body\": \"{body_base64}\", \"serialization_format\": 1, \"needs_layout_passes\": true{colors}}}}}"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_jax_byte_for_byte() {
        // From jax 0.10.2's output for a plain pallas_call (reference/pallas-examples).
        let jax = r#"{"custom_call_config": {"body": "QUJD", "serialization_format": 1, "needs_layout_passes": true}}"#;
        assert_eq!(super::backend_config("QUJD", &[], 1), jax);
    }

    #[test]
    fn colors_semaphore_results_as_jax_does() {
        // jax 0.10.2, a pallas_call returning (array, array, pltpu.SemaphoreType.DMA(())).
        let jax = r#"{"custom_call_config": {"body": "QUJD", "serialization_format": 1, "needs_layout_passes": true, "output_memory_space_colors": [{"color":2,"shape_index":[2]}]}}"#;
        assert_eq!(super::backend_config("QUJD", &[2], 3), jax);
        let one = r#"{"custom_call_config": {"body": "QUJD", "serialization_format": 1, "needs_layout_passes": true, "output_memory_space_colors": [{"color":2}]}}"#;
        assert_eq!(super::backend_config("QUJD", &[0], 1), one);
    }
}
