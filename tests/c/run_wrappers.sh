#!/bin/sh
# Compile tests/c/wrappers_all.c as C11 and C++11 with -Wall -Wextra -Werror
# against include/ and run the dispatch checks in it.  The program never
# links against the library: use_everything() is compiled but not called,
# so its library references are satisfied by stubs generated here.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/wrappers.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
CC=${CC:-gcc}
CXX=${CXX:-g++}
W="-Wall -Wextra -Werror"
# Stubs for the exported functions, so the executables link.
cat >"$TMP/stubs.c" <<'STUB'
#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>
uint32_t fi_version(void) { return 0; }
int fi_getinfo(uint32_t v, const char *n, const char *s, uint64_t f,
	       const struct fi_info *h, struct fi_info **i)
{ (void) v; (void) n; (void) s; (void) f; (void) h; (void) i; return -1; }
void fi_freeinfo(struct fi_info *i) { (void) i; }
struct fi_info *fi_dupinfo(const struct fi_info *i) { (void) i; return 0; }
int fi_fabric(struct fi_fabric_attr *a, struct fid_fabric **f, void *c)
{ (void) a; (void) f; (void) c; return -1; }
int fi_fabric2(struct fi_info *i, struct fid_fabric **f, uint64_t fl, void *c)
{ (void) i; (void) f; (void) fl; (void) c; return -1; }
int fi_open(uint32_t v, const char *n, void *a, size_t l, uint64_t f,
	    struct fid **fid, void *c)
{ (void) v; (void) n; (void) a; (void) l; (void) f; (void) fid; (void) c; return -1; }
const char *fi_strerror(int e) { (void) e; return ""; }
char *fi_tostr(const void *d, enum fi_type t) { (void) d; (void) t; return (char *) ""; }
char *fi_tostr_r(char *b, size_t l, const void *d, enum fi_type t)
{ (void) l; (void) d; (void) t; return b; }
int fi_param_define(const struct fi_provider *p, const char *n,
		    enum fi_param_type t, const char *h, ...)
{ (void) p; (void) n; (void) t; (void) h; return -1; }
int fi_param_get(struct fi_provider *p, const char *n, void *v)
{ (void) p; (void) n; (void) v; return -1; }
int fi_log_enabled(const struct fi_provider *p, enum fi_log_level l,
		   enum fi_log_subsys s) { (void) p; (void) l; (void) s; return 0; }
int fi_log_ready(const struct fi_provider *p, enum fi_log_level l,
		 enum fi_log_subsys s, uint64_t *t)
{ (void) p; (void) l; (void) s; (void) t; return 0; }
void fi_log(const struct fi_provider *p, enum fi_log_level l,
	    enum fi_log_subsys s, const char *fn, int ln, const char *fmt, ...)
{ (void) p; (void) l; (void) s; (void) fn; (void) ln; (void) fmt; }
STUB
$CC -std=c11 $W -Iinclude -c "$TMP/stubs.c" -o "$TMP/stubs.o"
$CC -std=c11 $W -Iinclude tests/c/wrappers_all.c "$TMP/stubs.o" -o "$TMP/w_c"
$CXX -std=c++11 $W -Iinclude -x c++ tests/c/wrappers_all.c -x none "$TMP/stubs.o" -o "$TMP/w_cxx"
$CC -std=c11 $W -pedantic-errors -Iinclude -c tests/c/wrappers_all.c -o "$TMP/w_p.o"
echo "C11:";   "$TMP/w_c"
echo "C++11:"; "$TMP/w_cxx"
