# Sourced by the MPI test scripts. private_shm VAR SCRIPT ARGS...: run as
# root where unshare works, runs SCRIPT ARGS again in a mount namespace of
# its own with a fresh tmpfs on /dev/shm and VAR=1 in its environment, and
# does not return; otherwise (VAR already set, not root, no unshare) it
# returns and the script goes on with the host's /dev/shm.
# Why: upstream's shm provider (in the MPICH wheel) names its files by pid
# and leaves them behind when a rank dies; a later rank whose pid names
# such a file is refused that name, and a run ended with a crash that way.
private_shm() {
	_ps_var=$1
	shift
	eval "[ -z \"\${$_ps_var:-}\" ]" || return 0
	[ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null || return 0
	export "$_ps_var=1"
	exec unshare --mount --propagation private bash -c \
		'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"' "$@"
}
