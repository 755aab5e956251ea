/*
 * Logging and parameter entry points, called as a C program or a DL
 * provider calls them. Declarations are written out here (matching
 * tests/abi/layout.tsv) so the test needs no installed headers.
 *
 * Usage: log_params <mode>, one mode per process because the log
 * configuration is read once:
 *   params   fi_param_define / fi_param_get / fi_getparams / fi_freeparams
 *   log      run with FI_LOG_LEVEL=info FI_LOG_PROV=^hidden FI_LOG_SUBSYS=^cq
 *            FI_LOG_INTERVAL=100000: enablement, rate limit, line format
 *   nolog    run with no FI_LOG_* set: nothing is enabled
 *   location run with FI_LOG_LEVEL=warn FI_LOG_LOCATION=<dir>: writes one line
 * Prints "ok <mode>" and exits 0 on success; names the failed check otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fi_provider {
	uint32_t version;
	uint32_t fi_version;
	void *context[4];
	const char *name;
	void *getinfo, *fabric, *cleanup;
};

enum fi_param_type { FI_PARAM_STRING, FI_PARAM_INT, FI_PARAM_BOOL, FI_PARAM_SIZE_T };
struct fi_param {
	const char *name;
	enum fi_param_type type;
	const char *help_string;
	const char *value;
};
enum fi_log_subsys { FI_LOG_CORE, FI_LOG_FABRIC, FI_LOG_DOMAIN, FI_LOG_EP_CTRL,
		     FI_LOG_EP_DATA, FI_LOG_AV, FI_LOG_CQ, FI_LOG_EQ, FI_LOG_MR,
		     FI_LOG_CNTR };
enum fi_log_level { FI_LOG_WARN, FI_LOG_TRACE, FI_LOG_INFO, FI_LOG_DEBUG };

int fi_param_define(const struct fi_provider *, const char *, enum fi_param_type,
		    const char *, ...);
int fi_param_get(struct fi_provider *, const char *, void *);
int fi_getparams(struct fi_param **, int *);
void fi_freeparams(struct fi_param *);
int fi_log_enabled(const struct fi_provider *, enum fi_log_level, enum fi_log_subsys);
int fi_log_ready(const struct fi_provider *, enum fi_log_level, enum fi_log_subsys,
		 uint64_t *);
void fi_log(const struct fi_provider *, enum fi_log_level, enum fi_log_subsys,
	    const char *, int, const char *, ...);

_Static_assert(sizeof(struct fi_provider) == 72, "fi_provider size");
_Static_assert(offsetof(struct fi_provider, name) == 40, "fi_provider.name");
_Static_assert(sizeof(struct fi_param) == 32, "fi_param size");

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stdout, "FAIL %s:%d: %s\n", \
	__FILE__, __LINE__, #c); failures++; } } while (0)

static struct fi_provider prov = { .name = "testprov" };
static struct fi_provider hidden = { .name = "hidden" };

static void test_params(void)
{
	int i = -7, b = -7, count = -1, n;
	size_t sz = 7;
	char *s = NULL;
	struct fi_param *list = NULL, *p;
	int seen_count = 0, seen_level = 0, seen_core = 0;

	/* bad definitions */
	CHECK(fi_param_define(&prov, NULL, FI_PARAM_INT, "h") == -EINVAL);
	CHECK(fi_param_define(&prov, "x", FI_PARAM_INT, NULL) == -EINVAL);
	CHECK(fi_param_define(&prov, "x", FI_PARAM_INT, "") == -EINVAL);
	CHECK(fi_param_define(&prov, "x", (enum fi_param_type) 9, "h") == -EINVAL);
	CHECK(fi_param_get(&prov, "x", &i) == -ENOENT);

	CHECK(fi_param_define(&prov, "count", FI_PARAM_INT, "count of %d %s", 3, "things") == 0);
	CHECK(fi_param_define(&prov, "flag", FI_PARAM_BOOL, "a flag") == 0);
	CHECK(fi_param_define(&prov, "name", FI_PARAM_STRING, "a name") == 0);
	CHECK(fi_param_define(&prov, "bytes", FI_PARAM_SIZE_T, "a size") == 0);
	CHECK(fi_param_define(NULL, "rftest_core", FI_PARAM_INT, "core one") == 0);

	/* not set: -FI_ENODATA, value untouched */
	unsetenv("FI_TESTPROV_COUNT");
	CHECK(fi_param_get(&prov, "count", &i) == -ENODATA && i == -7);
	/* not defined */
	CHECK(fi_param_get(&prov, "nope", &i) == -ENOENT && i == -7);
	CHECK(fi_param_get(NULL, "count", &i) == -ENOENT);
	CHECK(fi_param_get(&prov, NULL, &i) == -EINVAL);
	CHECK(fi_param_get(&prov, "count", NULL) == -EINVAL);

	setenv("FI_TESTPROV_COUNT", "0x10", 1);
	setenv("FI_TESTPROV_FLAG", "Yes", 1);
	setenv("FI_TESTPROV_NAME", "some name", 1);
	setenv("FI_TESTPROV_BYTES", "4096", 1);
	setenv("FI_RFTEST_CORE", "-12", 1);
	CHECK(fi_param_get(&prov, "count", &i) == 0 && i == 16);
	CHECK(fi_param_get(&prov, "flag", &b) == 0 && b == 1);
	CHECK(fi_param_get(&prov, "name", &s) == 0 && s && !strcmp(s, "some name"));
	CHECK(s == getenv("FI_TESTPROV_NAME"));
	CHECK(fi_param_get(&prov, "bytes", &sz) == 0 && sz == 4096);
	CHECK(fi_param_get(NULL, "rftest_core", &i) == 0 && i == -12);

	setenv("FI_TESTPROV_FLAG", "off", 1);
	CHECK(fi_param_get(&prov, "flag", &b) == 0 && b == 0);
	b = 5;
	setenv("FI_TESTPROV_FLAG", "maybe", 1);
	CHECK(fi_param_get(&prov, "flag", &b) == -EINVAL && b == 5);
	i = 5;
	setenv("FI_TESTPROV_COUNT", "12abc", 1);
	CHECK(fi_param_get(&prov, "count", &i) == -EINVAL && i == 5);
	setenv("FI_TESTPROV_COUNT", "0x10", 1);

	/* listing */
	CHECK(fi_getparams(NULL, &n) == -EINVAL);
	CHECK(fi_getparams(&list, NULL) == -EINVAL);
	CHECK(fi_getparams(&list, &count) == 0);
	CHECK(list != NULL && count >= 5);
	for (n = 0, p = list; p && p->name; p++, n++) {
		CHECK(p->help_string != NULL);
		if (!strcmp(p->name, "FI_TESTPROV_COUNT")) {
			seen_count++;
			CHECK(p->type == FI_PARAM_INT);
			CHECK(!strcmp(p->help_string, "testprov: count of 3 things"));
			CHECK(p->value && !strcmp(p->value, "0x10"));
		}
		if (!strcmp(p->name, "FI_TESTPROV_BYTES"))
			CHECK(p->type == FI_PARAM_SIZE_T);
		if (!strcmp(p->name, "FI_LOG_LEVEL")) {
			seen_level++;
			CHECK(p->type == FI_PARAM_STRING);
		}
		if (!strcmp(p->name, "FI_RFTEST_CORE")) {
			seen_core++;
			CHECK(!strcmp(p->help_string, "core one"));
		}
	}
	CHECK(n == count);
	CHECK(seen_count == 1 && seen_level == 1 && seen_core == 1);
	fi_freeparams(list);
	fi_freeparams(NULL);
}

/* Run fn with fd 2 redirected to a temporary file; return what it wrote. */
static char *capture_stderr(void (*fn)(void))
{
	char path[] = "/tmp/rf_log_params_XXXXXX";
	static char buf[8192];
	int fd = mkstemp(path), saved = dup(2);
	ssize_t n;

	if (fd < 0 || saved < 0)
		return NULL;
	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	unlink(path);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static int logged_line;
static void emit_lines(void)
{
	char big[2000];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	logged_line = __LINE__ + 1;
	fi_log(&prov, FI_LOG_WARN, FI_LOG_EP_DATA, __func__, __LINE__, "hello %d %s\n", 42, "x");
	fi_log(NULL, FI_LOG_INFO, FI_LOG_AV, "corefn", 7, "core line\n");
	fi_log(&prov, FI_LOG_INFO, FI_LOG_CORE, "bigfn", 8, "%s", big);
}

static void test_log(void)
{
	uint64_t showtime = 0, later = 0;
	char expect[256], *out, *nl, *third;
	long secs;
	int pid, off;

	CHECK(fi_log_enabled(&prov, FI_LOG_WARN, FI_LOG_CORE));
	CHECK(fi_log_enabled(&prov, FI_LOG_INFO, FI_LOG_EP_DATA));
	CHECK(!fi_log_enabled(&prov, FI_LOG_DEBUG, FI_LOG_CORE));
	CHECK(!fi_log_enabled(&prov, FI_LOG_WARN, FI_LOG_CQ));
	CHECK(!fi_log_enabled(&hidden, FI_LOG_WARN, FI_LOG_CORE));
	CHECK(fi_log_enabled(NULL, FI_LOG_INFO, FI_LOG_CORE));
	CHECK(!fi_log_enabled(&prov, (enum fi_log_level) 17, FI_LOG_CORE));
	CHECK(!fi_log_enabled(&prov, FI_LOG_WARN, (enum fi_log_subsys) 99));

	CHECK(fi_log_ready(&prov, FI_LOG_WARN, FI_LOG_CORE, &showtime) == 1);
	CHECK(showtime != 0);
	CHECK(fi_log_ready(&prov, FI_LOG_WARN, FI_LOG_CORE, &showtime) == 0);
	CHECK(fi_log_ready(&prov, FI_LOG_DEBUG, FI_LOG_CORE, &later) == 0 && later == 0);

	out = capture_stderr(emit_lines);
	CHECK(out != NULL);
	if (!out)
		return;
	/* libfabric:<pid>:<secs>::testprov:ep_data:emit_lines():<line><warn> hello 42 x */
	off = 0;
	CHECK(sscanf(out, "libfabric:%d:%ld:%n", &pid, &secs, &off) == 2 && off > 0);
	CHECK(pid == getpid());
	CHECK(labs((long) time(NULL) - secs) <= 5);
	snprintf(expect, sizeof(expect), ":testprov:ep_data:emit_lines():%d<warn> hello 42 x\n",
		 logged_line);
	nl = strchr(out, '\n');
	CHECK(nl && !strncmp(out + off, expect, strlen(expect)));
	if (!nl)
		return;
	off = 0;
	CHECK(sscanf(nl + 1, "libfabric:%*d:%*d:%n", &off) == 0 && off > 0);
	CHECK(!strncmp(nl + 1 + off, ":core:av:corefn():7<info> core line\n", 36));
	third = strchr(nl + 1, '\n');
	CHECK(third && strstr(third + 1, ":testprov:core:bigfn():8<info> aaa"));
	/* fi_log formats at most 1023 bytes of message and adds no newline */
	if (third) {
		char *msg = strstr(third + 1, "<info> ");
		CHECK(msg && strlen(msg + 7) == 1023);
	}
}

static void test_nolog(void)
{
	CHECK(!fi_log_enabled(&prov, FI_LOG_WARN, FI_LOG_CORE));
	CHECK(!fi_log_enabled(NULL, FI_LOG_WARN, FI_LOG_CORE));
	uint64_t t = 0;
	CHECK(fi_log_ready(&prov, FI_LOG_WARN, FI_LOG_CORE, &t) == 0);
}

static void test_location(void)
{
	CHECK(fi_log_enabled(&prov, FI_LOG_WARN, FI_LOG_MR));
	fi_log(&prov, FI_LOG_WARN, FI_LOG_MR, "locfn", 3, "to file\n");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "params"))
		test_params();
	else if (!strcmp(mode, "log"))
		test_log();
	else if (!strcmp(mode, "nolog"))
		test_nolog();
	else if (!strcmp(mode, "location"))
		test_location();
	else {
		fprintf(stderr, "usage: %s params|log|nolog|location\n", argv[0]);
		return 2;
	}
	if (failures)
		return 1;
	printf("ok %s\n", mode);
	return 0;
}
