/* inventory.c: listing from an S3 Inventory report (inventory_manifest). */
#ifndef SK_S3_INVENTORY_H
#define SK_S3_INVENTORY_H

#include "ctx.h"

typedef struct s3_inventory s3_inventory;
int s3_inv_list(s3_ctx *c, const char *start_after, skippr_unit_cb cb,
                void *cb_data);
void s3_inv_free(s3_ctx *c);

#endif
