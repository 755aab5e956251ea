/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rfabric: interface between the library and providers.
 *
 * A provider built as a loadable module is a shared object named
 * lib<name>-fi.so that exports fi_prov_ini(); declare that function
 * with FI_EXT_INI.  It returns a static struct fi_provider.
 */

#ifndef FI_PROV_H
#define FI_PROV_H

#include <rdma/fabric.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_LIB_EXTENSION	"fi"
#define FI_LIB_SUFFIX		FI_LIB_EXTENSION ".so"

/* Definition header of a loadable provider's entry point. */
#define FI_EXT_INI \
	__attribute__((visibility("default"), EXTERNALLY_VISIBLE)) \
	struct fi_provider *fi_prov_ini(void)

/*
 * version:    the provider's own version (FI_VERSION encoded).
 * fi_version: the API version the provider was built for.
 * context:    reserved for the library.
 */
struct fi_provider {
	uint32_t	version;
	uint32_t	fi_version;
	struct fi_context	context;
	const char	*name;
	int	(*getinfo)(uint32_t, const char *, const char *, uint64_t,
			const struct fi_info *, struct fi_info **);
	int	(*fabric)(struct fi_fabric_attr *, struct fid_fabric **,
			void *);
	void	(*cleanup)(void);
};

/*
 * Register a tunable named FI_<PROV>_<param_name> (upper case) for
 * fi_info -e and the environment.  help_string_fmt is printf-style.
 */
int fi_param_define(const struct fi_provider *provider,
		    const char *param_name, enum fi_param_type type,
		    const char *help_string_fmt, ...)
	FI_FORMAT_PRINTF(4, 5);

/*
 * Read a defined tunable from the environment into *value, whose type
 * follows the registered type.  Returns -FI_ENODATA when it is unset.
 */
int fi_param_get(struct fi_provider *provider, const char *param_name,
		 void *value);

static inline int fi_param_get_str(struct fi_provider *provider,
				   const char *param_name, char **value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_int(struct fi_provider *provider,
				   const char *param_name, int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_bool(struct fi_provider *provider,
				    const char *param_name, int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_size_t(struct fi_provider *provider,
				      const char *param_name, size_t *value)
{
	return fi_param_get(provider, param_name, value);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_PROV_H */
