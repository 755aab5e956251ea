/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: provider logging.  Output is controlled by FI_LOG_LEVEL,
 * FI_LOG_PROV and FI_LOG_SUBSYS in the environment.
 */

#ifndef FI_LOG_H
#define FI_LOG_H

#include <errno.h>
#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#ifdef __cplusplus
extern "C" {
#endif

enum fi_log_subsys {
	FI_LOG_CORE,
	FI_LOG_FABRIC,
	FI_LOG_DOMAIN,
	FI_LOG_EP_CTRL,
	FI_LOG_EP_DATA,
	FI_LOG_AV,
	FI_LOG_CQ,
	FI_LOG_EQ,
	FI_LOG_MR,
	FI_LOG_CNTR,
	FI_LOG_SUBSYS_MAX
};

enum fi_log_level {
	FI_LOG_WARN,
	FI_LOG_TRACE,
	FI_LOG_INFO,
	FI_LOG_DEBUG,
	FI_LOG_MAX
};

/* Non-zero when a message at this level/subsystem would be printed. */
int fi_log_enabled(const struct fi_provider *prov, enum fi_log_level level,
		   enum fi_log_subsys subsys);

/*
 * Like fi_log_enabled, but also rate-limits: *showtime holds the earliest
 * time of the next message and is advanced when this returns non-zero.
 */
int fi_log_ready(const struct fi_provider *prov, enum fi_log_level level,
		 enum fi_log_subsys subsys, uint64_t *showtime);

void fi_log(const struct fi_provider *prov, enum fi_log_level level,
	    enum fi_log_subsys subsys, const char *func, int line,
	    const char *fmt, ...) FI_FORMAT_PRINTF(6, 7);

/* Logging never changes errno as seen by the caller. */
#define FI_LOG(prov, level, subsystem, ...)				\
	do {								\
		if (fi_log_enabled(prov, level, subsystem)) {		\
			int fi_log_errno_ = errno;			\
			fi_log(prov, level, subsystem,			\
			       __func__, __LINE__, __VA_ARGS__);	\
			errno = fi_log_errno_;				\
		}							\
	} while (0)

#define FI_LOG_SPARSE(prov, level, subsystem, ...)			\
	do {								\
		static uint64_t fi_log_showtime_;			\
		if (fi_log_ready(prov, level, subsystem,		\
				 &fi_log_showtime_)) {			\
			int fi_log_errno_ = errno;			\
			fi_log(prov, level, subsystem,			\
			       __func__, __LINE__, __VA_ARGS__);	\
			errno = fi_log_errno_;				\
		}							\
	} while (0)

#define FI_WARN(prov, subsystem, ...) \
	FI_LOG(prov, FI_LOG_WARN, subsystem, __VA_ARGS__)
#define FI_WARN_SPARSE(prov, subsystem, ...) \
	FI_LOG_SPARSE(prov, FI_LOG_WARN, subsystem, __VA_ARGS__)
#define FI_TRACE(prov, subsystem, ...) \
	FI_LOG(prov, FI_LOG_TRACE, subsystem, __VA_ARGS__)
#define FI_INFO(prov, subsystem, ...) \
	FI_LOG(prov, FI_LOG_INFO, subsystem, __VA_ARGS__)

/* Debug messages exist only in builds with ENABLE_DEBUG set. */
#if defined(ENABLE_DEBUG) && ENABLE_DEBUG
#define FI_DBG(prov, subsystem, ...) \
	FI_LOG(prov, FI_LOG_DEBUG, subsystem, __VA_ARGS__)
#define FI_DBG_TRACE(prov, subsystem, ...) \
	FI_LOG(prov, FI_LOG_TRACE, subsystem, __VA_ARGS__)
#else
#define FI_DBG(prov, subsystem, ...) do { } while (0)
#define FI_DBG_TRACE(prov, subsystem, ...) do { } while (0)
#endif

/* A warning printed at most once per call site. */
#define FI_WARN_ONCE(prov, subsystem, ...)				\
	do {								\
		static int fi_log_done_;				\
		if (!fi_log_done_ &&					\
		    fi_log_enabled(prov, FI_LOG_WARN, subsystem)) {	\
			int fi_log_errno_ = errno;			\
			fi_log_done_ = 1;				\
			fi_log(prov, FI_LOG_WARN, subsystem,		\
			       __func__, __LINE__, __VA_ARGS__);	\
			errno = fi_log_errno_;				\
		}							\
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* FI_LOG_H */
