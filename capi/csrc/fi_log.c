/*
 * The variadic entry points of libfabric.so.1. Each one formats its
 * arguments with the C library and hands the finished string to Rust
 * (rf_* functions in capi/src/log_params.rs), which does all the work.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct fi_provider;

/* Upstream truncates a formatted log message to this many bytes. */
#define RF_LOG_MSG_MAX 1024

#define RF_FI_EINVAL 22
#define RF_FI_ENOMEM 12

void rf_log_emit(const struct fi_provider *prov, int level, int subsys,
		 const char *func, int line, const char *msg);
int rf_param_define(const struct fi_provider *prov, const char *name,
		    int type, const char *help);

__attribute__((visibility("default"), format(printf, 6, 7)))
void fi_log(const struct fi_provider *prov, int level, int subsys,
	    const char *func, int line, const char *fmt, ...)
{
	char msg[RF_LOG_MSG_MAX];
	int saved = errno;
	va_list ap;

	if (!fmt)
		return;
	va_start(ap, fmt);
	if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
		msg[0] = '\0';
	va_end(ap);
	rf_log_emit(prov, level, subsys, func, line, msg);
	errno = saved;
}

__attribute__((visibility("default"), format(printf, 4, 5)))
int fi_param_define(const struct fi_provider *prov, const char *param_name,
		    int type, const char *help_fmt, ...)
{
	char *help = NULL;
	va_list ap;
	int n, ret;

	if (!param_name || !help_fmt || !*help_fmt)
		return -RF_FI_EINVAL;
	va_start(ap, help_fmt);
	n = vasprintf(&help, help_fmt, ap);
	va_end(ap);
	if (n < 0)
		return -RF_FI_ENOMEM;
	ret = rf_param_define(prov, param_name, type, help);
	free(help);
	return ret;
}
