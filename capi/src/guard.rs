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

/// An ops-table slot the object does not support: `-FI_ENOSYS`.
macro_rules! enosys_fn {
    ($vis:vis $name:ident ( $($t:ty),* $(,)? ) -> $r:ty) => {
        $vis unsafe extern "C" fn $name($(_: $t),*) -> $r {
            -(rfabric_core::abi::FI_ENOSYS as $r)
        }
    };
}
