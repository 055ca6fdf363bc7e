/* testdata.h: where the unit tests find ../shared/testdata (the
 * JSONTestSuite and csv-spectrum conformance suites), and what they do when
 * it is missing.
 *
 * Include after <cmocka.h>. SKIPPR_TESTDATA is the folder, set by
 * tests/CMakeLists.txt. testdata_require(path) returns when path exists;
 * otherwise it fails the test under CI=true (CI checks out ../shared beside
 * the project) and elsewhere skips it with a line naming the path, so a
 * bare clone still passes the suite. */
#ifndef SKIPPR_TESTS_TESTDATA_H
#define SKIPPR_TESTS_TESTDATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void testdata_require(const char *path)
{
    if (access(path, R_OK) == 0)
        return;
    const char *ci = getenv("CI");
    if (ci && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0))
        fail_msg("%s is missing (CI=true needs ../shared)", path);
    print_message("skip: %s not found\n", path);
    skip();
}

#endif
