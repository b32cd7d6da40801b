/*
 * blas — OpenBLAS runs one thread: checked by a constructor before main();
 * one product at a time, under a lock; and the process's first product
 * takes OpenBLAS's work buffer where running out of memory can be said
 * (blas.c). Nothing here is
 * called by name: configure's OPENBLAS_LIBS links it in (-u) and routes
 * cblas_sgemm through it (--wrap).
 */
#ifndef ZS_ENGINE_BLAS_H
#define ZS_ENGINE_BLAS_H

void zs_blas_check_serial(void);

#endif
