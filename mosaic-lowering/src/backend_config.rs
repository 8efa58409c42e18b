//! The custom call's `backend_config`: JSON written by hand in exactly the key order and
//! spacing of JAX's `CustomCallBackendConfig.to_json()` (jax 0.10.2, plain `pallas_call`).

/// `{"custom_call_config": {"body": …, "serialization_format": 1, "needs_layout_passes": true}}`
///
/// `needs_layout_passes` is always true for TensorCore kernels: libtpu runs Mosaic's layout
/// passes at compile time, which is what lets a CPU-only host produce the kernel.
pub fn backend_config(body_base64: &str) -> String {
    format!(
        "{{\"custom_call_config\": {{\"body\": \"{body_base64}\", \"serialization_format\": 1, \"needs_layout_passes\": true}}}}"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_jax_byte_for_byte() {
        // From jax 0.10.2's output for a plain pallas_call (reference/pallas-examples).
        let jax = r#"{"custom_call_config": {"body": "QUJD", "serialization_format": 1, "needs_layout_passes": true}}"#;
        assert_eq!(super::backend_config("QUJD"), jax);
    }
}
