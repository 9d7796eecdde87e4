//! etcd's failures as elect's typed errors: one constructor every module
//! of the backend shares, below all of them.

use crate::backend_kind::Backend;
use crate::error::{BoxError, Error};

/// The backend every error of this module names.
pub(super) const BACKEND: Backend = Backend::Etcd;

/// A failed etcd request, named by what we were doing.
pub(crate) fn etcd_error(action: &'static str, e: impl Into<BoxError>) -> Error {
    Error::backend(BACKEND, action, e)
}
