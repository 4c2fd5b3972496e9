//! EAL argument handling that needs no DPDK: building argv, reading the memory size, and the
//! mempool memory estimate (so it is unit-tested on machines without DPDK too).

use crate::error::DpdkError;

/// `argv[0]` handed to `rte_eal_init` (EAL uses it only in log lines).
pub const PROGRAM_NAME: &str = "headroom";

/// EAL memory without hugepages when `-m` is not given (DPDK 22.11 default).
pub const NO_HUGE_DEFAULT_MEMORY_MIB: u64 = 64;

/// Page size that objects of an IOVA-contiguous mempool must not cross when EAL runs without
/// hugepages (normal 4 KiB pages; measured on DPDK 22.11, see README.md).
pub const NO_HUGE_PAGE_BYTES: u64 = 4096;

/// `sizeof(struct rte_mbuf)` in DPDK 22.11 (two cache lines).
pub const MBUF_STRUCT_BYTES: u64 = 128;

/// Per-object header a mempool puts in front of each element (`struct rte_mempool_objhdr`,
/// rounded up to a cache line).
pub const MEMPOOL_OBJ_HEADER_BYTES: u64 = 64;

/// Size of one lcore's `struct rte_mempool_cache` (room for 2 x 512 object pointers, cache-line
/// aligned); a pool with a cache reserves one per possible lcore.
pub const MEMPOOL_CACHE_STRUCT_BYTES: u64 = 8256;

/// `RTE_MAX_LCORE` of Debian's DPDK 22.11 build.
pub const MAX_LCORE: u64 = 128;

/// The argument vector handed to `rte_eal_init`: [`PROGRAM_NAME`], the user's arguments, and
/// `--file-prefix=headroom-<pid>` when the user gave no `--file-prefix` (two DPDK primary
/// processes with the same prefix collide on `/var/run/dpdk/<prefix>/config`).
///
/// Refuses NUL bytes (C strings cannot hold them) and `--` (headroom takes no application
/// arguments through EAL).
pub fn effective_eal_args(user_args: &[String], pid: u32) -> Result<Vec<String>, DpdkError> {
    let mut args = Vec::with_capacity(user_args.len() + 2);
    args.push(PROGRAM_NAME.to_owned());
    for arg in user_args {
        if arg.contains('\0') {
            return Err(DpdkError::InvalidEalArgument {
                argument: arg.clone(),
                reason: "contains a NUL byte",
            });
        }
        if arg == "--" {
            return Err(DpdkError::InvalidEalArgument {
                argument: arg.clone(),
                reason: "headroom passes no application arguments to EAL; give only EAL options",
            });
        }
        args.push(arg.clone());
    }
    if !has_file_prefix(user_args) {
        args.push(format!("--file-prefix=headroom-{pid}"));
    }
    Ok(args)
}

fn has_file_prefix(args: &[String]) -> bool {
    args.iter()
        .any(|arg| arg == "--file-prefix" || arg.starts_with("--file-prefix="))
}

/// The EAL memory in MiB when `args` run EAL without hugepages (`--no-huge`): the value of
/// `-m` (`-m 512`, `-m512`), or [`NO_HUGE_DEFAULT_MEMORY_MIB`]. `None` with hugepages, where
/// memory grows on demand and no fixed limit applies.
#[must_use]
pub fn no_huge_memory_mib(args: &[String]) -> Option<u64> {
    if !args.iter().any(|arg| arg == "--no-huge") {
        return None;
    }
    let mut memory_mib = NO_HUGE_DEFAULT_MEMORY_MIB;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == "-m" {
            iter.next().map(String::as_str)
        } else {
            arg.strip_prefix("-m")
                .filter(|rest| rest.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty())
        };
        if let Some(parsed) = value.and_then(|v| v.parse::<u64>().ok()) {
            memory_mib = parsed;
        }
    }
    Some(memory_mib)
}

/// Estimated bytes of EAL memory a packet mbuf pool takes without hugepages:
/// the objects, the mempool's ring and its header with per-lcore caches.
///
/// Objects of an IOVA-contiguous pool never cross a 4 KiB page without hugepages, so an mbuf
/// of 64 (header) + 128 (`rte_mbuf`) + 2176 (default data room) = 2368 bytes occupies a whole
/// page. The model matches the largest pools that could be created on DPDK 22.11 to within
/// 0.1 % (README.md has the measurements).
#[must_use]
pub fn estimated_pool_bytes(n_mbufs: u32, cache_size: u32, data_room_bytes: u16) -> u64 {
    let n = u64::from(n_mbufs);
    let element = MEMPOOL_OBJ_HEADER_BYTES
        + (MBUF_STRUCT_BYTES + u64::from(data_room_bytes)).next_multiple_of(64);
    let objects = if element <= NO_HUGE_PAGE_BYTES {
        let per_page = NO_HUGE_PAGE_BYTES / element;
        n.div_ceil(per_page) * NO_HUGE_PAGE_BYTES
    } else {
        n * element
    };
    // The pool's ring holds n + 1 pointers, rounded up to a power of two.
    let ring = (n + 1).next_power_of_two() * 8;
    let header = if cache_size > 0 {
        MAX_LCORE * MEMPOOL_CACHE_STRUCT_BYTES
    } else {
        0
    };
    objects + ring + header
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn program_name_is_prepended_and_file_prefix_added_when_missing() {
        let args = effective_eal_args(&strings(&["--no-huge", "-m", "512"]), 4242).unwrap();
        assert_eq!(
            args,
            strings(&[
                "headroom",
                "--no-huge",
                "-m",
                "512",
                "--file-prefix=headroom-4242"
            ])
        );
    }

    #[test]
    fn a_given_file_prefix_is_kept_in_either_form() {
        for user in [
            strings(&["--file-prefix=lab1"]),
            strings(&["--file-prefix", "lab1"]),
        ] {
            let args = effective_eal_args(&user, 1).unwrap();
            assert_eq!(&args[1..], &user[..]);
        }
    }

    #[test]
    fn nul_bytes_and_double_dash_are_refused() {
        assert!(matches!(
            effective_eal_args(&strings(&["--vdev=net_null0\0"]), 1),
            Err(DpdkError::InvalidEalArgument { .. })
        ));
        assert!(matches!(
            effective_eal_args(&strings(&["--no-huge", "--", "-p", "3"]), 1),
            Err(DpdkError::InvalidEalArgument { .. })
        ));
    }

    #[test]
    fn memory_is_read_only_without_hugepages() {
        assert_eq!(no_huge_memory_mib(&strings(&["-m", "512"])), None);
        assert_eq!(
            no_huge_memory_mib(&strings(&["--no-huge", "-m", "512"])),
            Some(512)
        );
        assert_eq!(
            no_huge_memory_mib(&strings(&["--no-huge", "-m1024"])),
            Some(1024)
        );
        assert_eq!(
            no_huge_memory_mib(&strings(&["--no-huge", "--no-pci"])),
            Some(NO_HUGE_DEFAULT_MEMORY_MIB)
        );
        // "-m" must be followed by digits to count; other options starting with -m are ignored.
        assert_eq!(
            no_huge_memory_mib(&strings(&["--no-huge", "-mfoo"])),
            Some(NO_HUGE_DEFAULT_MEMORY_MIB)
        );
    }

    /// The largest pools that DPDK 22.11 could create with `--no-huge -m <MiB>` (binary search,
    /// cache 0; see README.md) must fit the estimate, and one 4 KiB page fewer must not be
    /// over-estimated by more than 0.5 %: the estimate neither refuses pools that fit nor lets
    /// through pools that obviously cannot.
    #[test]
    fn estimate_matches_measured_no_huge_limits() {
        const MIB: u64 = 1024 * 1024;
        // (-m MiB, data room, largest n that worked)
        let measured: [(u64, u16, u32); 8] = [
            (64, 2176, 16_313),
            (128, 2176, 32_665),
            (256, 2176, 65_369),
            (512, 2176, 130_777),
            (256, 1152, 194_955),
            (512, 1152, 390_027),
            (256, 4224, 60_628),
            (512, 9216, 56_987),
        ];
        for (memory_mib, data_room, largest) in measured {
            let estimate = estimated_pool_bytes(largest, 0, data_room);
            let memory = memory_mib * MIB;
            assert!(
                estimate <= memory,
                "-m {memory_mib}, room {data_room}: {estimate} > {memory}"
            );
            assert!(
                estimate * 1000 >= memory * 985,
                "-m {memory_mib}, room {data_room}: estimate {estimate} far below {memory}"
            );
        }
    }

    #[test]
    fn a_cache_costs_one_cache_struct_per_possible_lcore() {
        assert_eq!(
            estimated_pool_bytes(1023, 256, 2176) - estimated_pool_bytes(1023, 0, 2176),
            MAX_LCORE * MEMPOOL_CACHE_STRUCT_BYTES
        );
    }
}
