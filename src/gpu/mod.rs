//! TEMPORARY stand-in; replaced by the NVML sampler.
pub fn parse_visible_devices(value: &str) -> Option<Vec<u32>> {
    value.split(',').map(|s| s.trim().parse().ok()).collect()
}
