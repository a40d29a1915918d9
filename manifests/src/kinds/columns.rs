//! Printer columns, as Kubernetes' `additionalPrinterColumns`:
//! each kind's row in [`super::info::KINDS`] lists the columns `pamctl get`
//! prints after NAME, and pamctl's one table renderer reads them. A kind
//! whose cells are fields of its printed object needs nothing else; the
//! few cells worked out from several fields are a [`Derived`] each.

/// One column of `pamctl get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub header: &'static str,
    pub cell: Cell,
    /// Printed with `-o wide` only.
    pub wide: bool,
}

/// What a cell shows of a printed object (JSON pointers into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    /// The field as text; `<none>` when absent, null or empty.
    Text(&'static str),
    /// How long ago `metadata.creationTimestamp` was.
    Age,
    /// A boolean field, `false` when absent.
    Flag(&'static str),
    /// A whole number, `0` when absent.
    Count(&'static str),
    /// An array's length, `0` when absent.
    Len(&'static str),
    /// How long ago a timestamp was; `<never>` when absent.
    Since(&'static str),
    /// An array of strings, comma-separated; empty when absent.
    Join(&'static str),
    /// A revision as `git log --oneline` shows it (7 hex digits).
    ShortRev(&'static str),
    /// A cell worked out from several fields.
    Computed(Derived),
}

/// The cells pamctl works out from more than one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived {
    /// A task's phase, else its declared status.
    TaskStatus,
    /// A task's `done/total`.
    Completion,
    /// The tasks a task waits for, comma-separated, `<none>` when none.
    BlockedBy,
    /// Why a pending run waits, else its failure reason.
    RunReason,
    /// The message that goes with [`Derived::RunReason`].
    RunMessage,
    /// The newest thing a run's agent did (`status.lastActivity`), in words.
    LastActivity,
    /// A host's providers with their versions.
    Providers,
    /// A host's free workspace bytes.
    Free,
    /// Tokens of the kind's usage roll-up (the registry's `usage`).
    Tokens,
    /// Cost of the kind's usage roll-up.
    Cost,
    /// A Secret's key names (never its values).
    SecretKeys,
    /// The total size of a Secret's values.
    SecretSize,
}

/// A column printed always.
pub const fn col(header: &'static str, cell: Cell) -> Column {
    Column {
        header,
        cell,
        wide: false,
    }
}

/// A column printed with `-o wide` only.
pub const fn wide(header: &'static str, cell: Cell) -> Column {
    Column {
        header,
        cell,
        wide: true,
    }
}
