/*
 * blas — OpenBLAS runs one thread: checked by a constructor before main()
 * (blas.c). Declared for the linker's -u (configure.ac), not to be called.
 */
#ifndef ZS_ENGINE_BLAS_H
#define ZS_ENGINE_BLAS_H

void zs_blas_check_serial(void);

#endif
