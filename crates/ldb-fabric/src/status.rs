//! The status values of `p2pmark_status` / `amd_fabric_status` and of each
//! block's `status` key: the result document's own type, so that what the
//! diagnostics write and what the reports read are one enum.

pub use ldb_core::document::FabricStatus;
