//! The one way an entry point is entered: panic containment and NULL checks.

/// Run `$body` (an expression yielding the C return value) with panics
/// contained. A panic is logged and becomes `$on_panic`.
macro_rules! guard {
    ($on_panic:expr, $body:expr) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(_) => {
                rfabric_core::log::internal_error(concat!(module_path!(), ": panic contained at the C boundary"));
                $on_panic
            }
        }
    }};
}

/// Return `-FI_EINVAL` (with a log line naming the argument) when any of the
/// given pointers is NULL.
macro_rules! null_check {
    ($($p:ident),+ $(,)?) => {
        $(
            if $p.is_null() {
                rfabric_core::log::warn_core(concat!("NULL argument: ", stringify!($p)));
                return -(rfabric_core::abi::FI_EINVAL as i32);
            }
        )+
    };
}

/// As `null_check!`, for entry points that return `ssize_t`.
macro_rules! null_check_ssize {
    ($($p:ident),+ $(,)?) => {
        $(
            if $p.is_null() {
                rfabric_core::log::warn_core(concat!("NULL argument: ", stringify!($p)));
                return -(rfabric_core::abi::FI_EINVAL as isize);
            }
        )+
    };
}

/// An ops-table slot the object does not support: `-FI_ENOSYS` when the
/// slot is called on one of our handles of type `$h`, `-FI_EINVAL` for any
/// other fid (the one checked conversion, `Handle::from_fid`, decides).
macro_rules! enosys_fn {
    ($vis:vis $name:ident < $h:ty > ( $first:ty $(, $t:ty)* $(,)? ) -> $r:ty) => {
        /// An unsupported slot (see `enosys_fn!`).
        ///
        /// # Safety
        /// The first argument is NULL or a readable fid.
        $vis unsafe extern "C" fn $name(f: $first $(, _: $t)*) -> $r {
            // SAFETY: checked conversion (caller: a fid).
            let ours = unsafe { <$h as $crate::handle::Handle>::from_fid(f) }.is_some();
            $crate::handle::unsupported(ours) as $r
        }
    };
}
