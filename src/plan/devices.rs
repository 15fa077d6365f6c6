//! `CUDA_VISIBLE_DEVICES` in a config's environment: which GPUs it uses.

/// Parses `CUDA_VISIBLE_DEVICES`. `Some(list)` is the device indices (empty for ""
/// or "-1": no GPU visible); `None` means the value names devices by UUID or MIG id
/// (or is otherwise unreadable), so the caller should assume every GPU.
///
/// Like CUDA, the list ends at the first negative or empty entry; duplicates count
/// once. The indices are CUDA's, which match NVML's only with
/// `CUDA_DEVICE_ORDER=PCI_BUS_ID` (what servers in a sweep normally set).
pub fn parse_visible_devices(value: &str) -> Option<Vec<u32>> {
    let mut devices = Vec::new();
    for entry in value.trim().split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            break;
        }
        match entry.parse::<i64>() {
            Ok(n) if n < 0 => break,
            Ok(n) => {
                let index = u32::try_from(n).ok()?;
                if !devices.contains(&index) {
                    devices.push(index);
                }
            }
            // "GPU-8f3c…", "MIG-…", or something we cannot map to an index.
            Err(_) => return None,
        }
    }
    Some(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_devices() {
        assert_eq!(parse_visible_devices("0,1,2,3"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_visible_devices(" 2, 5 "), Some(vec![2, 5]));
        assert_eq!(parse_visible_devices(""), Some(vec![]));
        assert_eq!(parse_visible_devices("-1"), Some(vec![]));
        assert_eq!(parse_visible_devices("0,1,-1,2"), Some(vec![0, 1]));
        assert_eq!(parse_visible_devices("1,1,0"), Some(vec![1, 0]));
        assert_eq!(
            parse_visible_devices("GPU-8f3c2a1b-0000-1111-2222-333344445555"),
            None
        );
        assert_eq!(parse_visible_devices("MIG-GPU-8f3c/1/0"), None);
        assert_eq!(parse_visible_devices("0,GPU-8f3c"), None);
    }
}
