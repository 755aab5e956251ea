/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: error numbers.  Calls return 0 on success or a negated FI_E*
 * value.  The first group reuses the host's errno numbers; library
 * specific errors start at FI_ERRNO_OFFSET.
 */

#ifndef FI_ERRNO_H
#define FI_ERRNO_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_SUCCESS		0

/* Errors shared with the operating system. */
#define FI_EPERM		EPERM
#define FI_ENOENT		ENOENT
#define FI_EINTR		EINTR
#define FI_EIO			EIO
#define FI_E2BIG		E2BIG
#define FI_EBADF		EBADF
#define FI_EAGAIN		EAGAIN
#define FI_ENOMEM		ENOMEM
#define FI_EACCES		EACCES
#define FI_EFAULT		EFAULT
#define FI_EBUSY		EBUSY
#define FI_ENODEV		ENODEV
#define FI_EINVAL		EINVAL
#define FI_EMFILE		EMFILE
#define FI_ENOSPC		ENOSPC
#define FI_ENOSYS		ENOSYS
#define FI_EWOULDBLOCK		EWOULDBLOCK
#define FI_ENOMSG		ENOMSG
#define FI_ENODATA		ENODATA
#define FI_EOVERFLOW		EOVERFLOW
#define FI_EMSGSIZE		EMSGSIZE
#define FI_ENOPROTOOPT		ENOPROTOOPT
#define FI_EOPNOTSUPP		EOPNOTSUPP
#define FI_EADDRINUSE		EADDRINUSE
#define FI_EADDRNOTAVAIL	EADDRNOTAVAIL
#define FI_ENETDOWN		ENETDOWN
#define FI_ENETUNREACH		ENETUNREACH
#define FI_ECONNABORTED		ECONNABORTED
#define FI_ECONNRESET		ECONNRESET
#define FI_ENOBUFS		ENOBUFS
#define FI_EISCONN		EISCONN
#define FI_ENOTCONN		ENOTCONN
#define FI_ESHUTDOWN		ESHUTDOWN
#define FI_ETIMEDOUT		ETIMEDOUT
#define FI_ECONNREFUSED		ECONNREFUSED
#define FI_EHOSTDOWN		EHOSTDOWN
#define FI_EHOSTUNREACH		EHOSTUNREACH
#define FI_EALREADY		EALREADY
#define FI_EINPROGRESS		EINPROGRESS
#define FI_EREMOTEIO		EREMOTEIO
#define FI_EPROTO		EPROTO
#define FI_ECANCELED		ECANCELED
#define FI_EKEYREJECTED		EKEYREJECTED

/* Errors specific to the fabric interface. */
#define FI_ERRNO_OFFSET		256

enum {
	FI_EOTHER		= FI_ERRNO_OFFSET, /* unspecified failure */
	FI_ETOOSMALL		= 257,	/* buffer too small */
	FI_EOPBADSTATE		= 258,	/* object in wrong state */
	FI_EAVAIL		= 259,	/* error entry waiting to be read */
	FI_EBADFLAGS		= 260,	/* flag combination not valid */
	FI_ENOEQ		= 261,	/* no event queue bound */
	FI_EDOMAIN		= 262,	/* objects from different domains */
	FI_ENOCQ		= 263,	/* no completion queue bound */
	FI_ECRC			= 264,	/* checksum mismatch */
	FI_ETRUNC		= 265,	/* data truncated */
	FI_ENOKEY		= 266,	/* key not available */
	FI_ENOAV		= 267,	/* no address vector bound */
	FI_EOVERRUN		= 268,	/* queue overrun */
	FI_ENORX		= 269,	/* receiver not ready */
	FI_ENOMR		= 270,	/* memory registration limit hit */
	FI_EFIREWALLADDR	= 271,	/* peer behind a firewall */
	FI_ERRNO_MAX
};

/* Text for an error number; accepts the value with either sign. */
const char *fi_strerror(int errnum);

#ifdef __cplusplus
}
#endif

#endif /* FI_ERRNO_H */
