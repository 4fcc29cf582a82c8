#!/bin/busybox sh
# /init of the soft-RoCE guest (packed by prepare.sh). Mounts the host's root
# read-only over 9p under a tmpfs overlay, runs the job the host left in the
# results share (job.sh) in that root, keeps its exit status, and powers off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
R=$(sed -n 's/.*nfsrdma.results=\([^ ]*\).*/\1/p' /proc/cmdline)  # the results share's path
K=$(sed -n 's/.*nfsrdma.kernel=\([^ ]*\).*/\1/p' /proc/cmdline)   # the unpacked kernel package
for m in $(cat /modules.list); do insmod "/lib/modules/$m" || echo "guest: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || { echo "guest: no host root"; poweroff -f; }
mount -t tmpfs -o size=75% tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot
mkdir -p "/newroot$R"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results "/newroot$R"
for d in proc sys dev; do mount --move /$d /newroot/$d; done
# No tmpfs over /tmp: the project may live there (CI's clone); writes land in
# the overlay's tmpfs anyway.
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/dev/pts /newroot/dev/shm
# What udev would make: bash's <(...) needs /dev/fd.
ln -sfn /proc/self/fd /newroot/dev/fd
ln -sfn /proc/self/fd/0 /newroot/dev/stdin
ln -sfn /proc/self/fd/1 /newroot/dev/stdout
ln -sfn /proc/self/fd/2 /newroot/dev/stderr
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t configfs configfs /newroot/sys/kernel/config 2>/dev/null
ver=$(uname -r)
# The guest kernel's modules, from the build directory on the host's root.
mkdir -p /newroot/lib/modules
ln -sfn "$K/lib/modules/$ver" "/newroot/lib/modules/$ver"
echo /sbin/modprobe >/newroot/proc/sys/kernel/modprobe
chroot /newroot /bin/sh -c "cd / && exec /bin/bash $R/job.sh" >"/newroot$R/output.log" 2>&1
echo $? >"/newroot$R/rc"
sync
umount "/newroot$R"
poweroff -f
