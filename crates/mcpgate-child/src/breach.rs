//! [`Breach`]: why the gateway ended a child (a bound it reached).

/// Why the gateway ended a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breach {
    /// Its group's resident memory passed the bound.
    Memory {
        /// The bound, bytes.
        limit: u64,
        /// What it held when sampled, bytes.
        used: u64,
    },
    /// Its group had more processes and threads than the bound.
    Processes {
        /// The bound.
        limit: u64,
        /// What it had.
        count: u64,
    },
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: u64 = 1 << 20;
        match self {
            Breach::Memory { limit, used } => write!(
                f,
                "memory limit {} MiB reached ({} MiB resident)",
                limit / MIB,
                used / MIB
            ),
            Breach::Processes { limit, count } => write!(
                f,
                "process limit {limit} reached ({count} processes and threads)"
            ),
        }
    }
}
