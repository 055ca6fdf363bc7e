/* The commands of skipprd besides sync and status (main.c). */
#ifndef SK_CLI_COMMANDS_H
#define SK_CLI_COMMANDS_H

#include <stdio.h>

#include "config/config.h"

/* `skipprd plugins [--json]`: doc (NULL: none) names plugin_dirs. Exit
 * code: 0, or 1 when the plugins cannot be loaded. */
int sk_cli_plugins(const sk_yaml_doc *doc, int as_json);

/* `skipprd validate [--pipeline P] [--reach]`: every pipeline of doc (or
 * P) checked, each finding written to out. Exit code: 0 valid, else 1. */
int sk_cli_validate(const sk_yaml_doc *doc, const char *pipeline, int reach,
                    FILE *out);

#endif
