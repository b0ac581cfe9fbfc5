/*
 * What the plugin reads from the configuration of the Slurm it runs in. slurmd and
 * slurmstepd hold it in the global `slurm_conf` (Slurm's read_config.c), which their
 * libslurmfull exports; its type, slurm_conf_t, is in the public slurm/slurm.h. The field
 * offsets come from the headers the plugin is built against, the release it is loaded by.
 * The symbol is weak: in a process without it (a test binary) the functions return NULL
 * instead of the plugin failing to load.
 */
#include <stddef.h>
#include <slurm/slurm.h>

#if !defined(SLURM_VERSION_NUMBER) || SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0)
#error "spank-lama needs the headers of Slurm 23.02 or later (the SPANK API its bindings use); these are older: build against a newer Slurm"
#endif

extern slurm_conf_t slurm_conf __attribute__((weak));

/* SlurmdSpoolDir as written in slurm.conf (%n and %h not expanded), or NULL. */
const char *lama_slurmd_spooldir(void)
{
	return &slurm_conf ? slurm_conf.slurmd_spooldir : NULL;
}
