/* No udev in a statically linked lama (make static): Debian's libhwloc.a asks udev for block
 * devices' names, and no distribution ships a static libudev. udev_new() answers NULL, and
 * hwloc goes on without udev as it does where udev is not running. */
#include <stddef.h>

struct udev;
struct udev_device;

struct udev *udev_new(void) { return NULL; }
struct udev *udev_unref(struct udev *udev) { (void)udev; return NULL; }
struct udev_device *udev_device_new_from_subsystem_sysname(struct udev *udev,
                                                           const char *subsystem,
                                                           const char *sysname)
{
    (void)udev; (void)subsystem; (void)sysname;
    return NULL;
}
struct udev_device *udev_device_unref(struct udev_device *dev) { (void)dev; return NULL; }
const char *udev_device_get_property_value(struct udev_device *dev, const char *key)
{
    (void)dev; (void)key;
    return NULL;
}
