/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: extension interfaces (provider-specific option ranges, fid
 * export/import, memory monitor and logging imports).
 */

#ifndef FI_EXT_H
#define FI_EXT_H

#include <stdbool.h>
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_endpoint.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_peer.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Each provider owns a 12-bit code shifted left by 16; its private values
 * are the negation of that base and the values following it.
 */
#define FI_PROV_SPECIFIC_EFA	(0xefa << 16)
#define FI_PROV_SPECIFIC_TCP	(0x7cb << 16)

/* EFA endpoint options (level FI_OPT_ENDPOINT). */
enum {
	FI_OPT_EFA_RNR_RETRY = -FI_PROV_SPECIFIC_EFA,
	FI_OPT_EFA_EMULATED_READ,
	FI_OPT_EFA_EMULATED_WRITE,
	FI_OPT_EFA_EMULATED_ATOMICS,
	FI_OPT_EFA_USE_DEVICE_RDMA,
	FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES,
	FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES,
	FI_OPT_EFA_HOMOGENEOUS_PEERS,
	FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV,
};

/* Argument of FI_EXPORT_FID. */
struct fi_fid_export {
	struct fid	**fid;
	uint64_t	flags;
	void	*context;
};

static inline int fi_export_fid(struct fid *fid, uint64_t flags,
				struct fid **expfid, void *context)
{
	struct fi_fid_export exp;

	exp.fid = expfid;
	exp.flags = flags;
	exp.context = context;
	return fi_control(fid, FI_EXPORT_FID, &exp);
}

static inline int fi_import_fid(struct fid *fid, struct fid *expfid,
				uint64_t flags)
{
	return fid->ops->bind(fid, expfid, flags);
}

/* Memory monitor supplied by the application (open "mr_cache"). */
struct fid_mem_monitor;

struct fi_ops_mem_monitor {
	size_t	size;
	int	(*start)(struct fid_mem_monitor *);
	void	(*stop)(struct fid_mem_monitor *);
	int	(*subscribe)(struct fid_mem_monitor *, const void *, size_t);
	void	(*unsubscribe)(struct fid_mem_monitor *, const void *, size_t);
	bool	(*valid)(struct fid_mem_monitor *, const void *, size_t);
};

struct fi_ops_mem_notify {
	size_t	size;
	void	(*notify)(struct fid_mem_monitor *, const void *, size_t);
};

struct fid_mem_monitor {
	struct fid	fid;
	struct fi_ops_mem_monitor	*export_ops;
	struct fi_ops_mem_notify	*import_ops;
};

/* Logging supplied by the application (open "logging"). */
#define FI_LOG_PROV_FILTERED	(1ULL << 0)

struct fi_ops_log {
	size_t	size;
	int	(*enabled)(const struct fi_provider *, enum fi_log_level,
			enum fi_log_subsys, uint64_t);
	int	(*ready)(const struct fi_provider *, enum fi_log_level,
			enum fi_log_subsys, uint64_t, uint64_t *);
	void	(*log)(const struct fi_provider *, enum fi_log_level,
			enum fi_log_subsys, const char *, int, const char *);
};

struct fid_logging {
	struct fid	fid;
	struct fi_ops_log	*ops;
};

/* Open the named library object and bind fid to it. */
static inline int fi_import(uint32_t version, const char *name, void *attr,
			    size_t attr_len, uint64_t flags, struct fid *fid,
			    void *context)
{
	struct fid *open_fid;
	int ret;

	ret = fi_open(version, name, attr, attr_len, flags, &open_fid,
		      context);
	if (ret != FI_SUCCESS)
		return ret;

	ret = fi_import_fid(open_fid, fid, flags);
	fi_close(open_fid);
	return ret;
}

static inline int fi_import_log(uint32_t version, uint64_t flags,
				struct fid_logging *log_fid)
{
	log_fid->fid.fclass = FI_CLASS_LOG;
	log_fid->ops->size = sizeof(struct fi_ops_log);
	return fi_import(version, "logging", NULL, 0, flags, &log_fid->fid,
			 log_fid);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_H */
