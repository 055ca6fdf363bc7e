/* The default chain's choice (chain.c): the first source that is set up,
 * in the order creds.h lists. */
#ifndef SKIPPR_S3_CHAIN_H
#define SKIPPR_S3_CHAIN_H

#include "cred.h"

/* Set cr up from the first source of the chain; 1 found, 0 none, -1
 * error already logged. */
int cr_choose(s3_creds *cr, const s3_creds_config *cfg);

#endif
