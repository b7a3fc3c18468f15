/*
 * setup.h: repository set-up shared by init, start and demo.
 */
#ifndef SETUP_H
#define SETUP_H

/* Installs the hooks (chaining existing ones) and default config;
 * 0 or error(). */
int setup_repository(int quiet);
/* Whether our hooks are installed in the effective hooks directory. */
int hooks_installed(void);
/* The best backend with a device that answers: cuda, hip, else host. */
const char *best_backend(void);
/* The backend start should use: autokernel.backend, else best. */
char *default_backend(void);

#endif
