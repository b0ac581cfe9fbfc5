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

/*
 * Slurm's functions that map a host to its NodeName (read_config.c, exported by
 * libslurmfull). Weak, like slurm_conf.
 */
extern char *slurm_conf_get_nodename(const char *node_hostname) __attribute__((weak));
extern char *slurm_conf_get_aliased_nodename(void) __attribute__((weak));

/*
 * The NodeName slurmd gives itself without -N (slurmd.c, _read_config, 24.11 to 26.05): the
 * node whose NodeHostname is the short host name, else the one whose NodeHostname is an alias
 * of this host; NULL outside slurmd or without a match. The string Slurm allocates is kept:
 * this runs once, when slurmd starts.
 */
const char *lama_slurmd_node_name(const char *short_host)
{
	char *name = NULL;

	if (!&slurm_conf || !slurm_conf_get_nodename || !slurm_conf_get_aliased_nodename)
		return NULL;
	name = slurm_conf_get_nodename(short_host);
	if (!name)
		name = slurm_conf_get_aliased_nodename();
	return name;
}
