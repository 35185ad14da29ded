import Testing

/// The contract of `MemoryStore`, one nested suite per guarantee.
///
/// The suites run one at a time: most of them start eight or more OS threads, and running
/// them side by side on a small machine would only make each one slower.
@Suite(.serialized) enum StoreContractTests {}
