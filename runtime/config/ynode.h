/* The YAML tree a config is read into: nodes that keep their line and
 * column, the document, and the error text every check fills. Types only
 * (yaml.c builds the tree; where.c says where a node is). */
#ifndef SK_CONFIG_YNODE_H
#define SK_CONFIG_YNODE_H

#include <stddef.h>

typedef enum sk_ykind { SK_Y_SCALAR, SK_Y_MAP, SK_Y_SEQ } sk_ykind;

typedef struct sk_ynode {
    sk_ykind kind;
    int line, col;   /* 1-based */
    char *value;     /* scalar text after interpolation */
    int quoted;      /* scalar was quoted */
    size_t n;        /* map pairs or seq items */
    struct sk_ynode **keys;  /* map: key scalars */
    struct sk_ynode **items; /* map: values; seq: items */
} sk_ynode;

typedef struct sk_yaml_doc {
    char *path;
    /* The folder the file is in, symlinks resolved (realpath), against
     * which relative paths in it are read; NULL for a document from memory
     * (they are then read against the working directory). */
    char *dir;
    sk_ynode *root;
} sk_yaml_doc;

/* Error text, with file:line:col when known. */
typedef struct sk_cfg_err {
    char msg[1024];
} sk_cfg_err;

#endif
