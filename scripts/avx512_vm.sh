#!/bin/bash
# avx512_vm.sh - runs a Linux x86-64 program on an emulated CPU WITH AVX-512:
# Bochs (Debian's 2.7, full-system emulation, Tiger Lake model) boots Debian's
# cloud kernel with a throw-away initramfs holding the program. For checking
# AVX-512 code on a machine without AVX-512 (QEMU 7.2 emulates AVX2 only).
# Used by scripts/avx512_check.sh.
#
# Usage: avx512_vm.sh ROOT_OVERLAY_DIR 'SHELL COMMAND' [MEM_MB]
#        avx512_vm.sh --setup        (install / fetch the parts below, then exit)
#
#   ROOT_OVERLAY_DIR  mirrors /: OVERLAY/opt/x/prog appears as /opt/x/prog in the
#                     guest. May be "" or "-" for none.
#   'SHELL COMMAND'   run in the guest as: cd / && sh -c 'SHELL COMMAND'  (busybox sh)
#   MEM_MB            guest RAM, default 1024.
#
# Set-up (first use; needs root for apt-get): Debian's bochs, bochsbios,
# vgabios, busybox-static, isolinux, syslinux-common and genisoimage; the cloud
# kernel image (apt-get download, unpacked under $VM_CACHE); and a copy of
# bochs-bin with two Bochs 2.7 AVX-512 bugs mended, both of which compiled
# AVX-512 code (LLVM's, Halide's) runs into:
#   * KSHIFTLW / KSHIFTRW treat a shift count of 15 as "shift everything out"
#     (the count is compared with 14, not 15; the byte, dword and qword forms
#     are right): wrong mask bits, wrong branches;
#   * EVEX VPINSRB scales an 8-bit displacement by 2 (its memory operand is
#     typed as a word in the opcode table), so `vpinsrb $i, 1(%rax), ...` reads
#     the byte at 2(%rax).
# The copy patches the two compare immediates and that operand's type byte
# (located through exported symbols and relocations, checked byte for byte
# first; any other bochs-bin is refused). scripts/avx512_check.sh checks both
# with an instruction self-test before it trusts the emulator.
#
# What goes into the initramfs (uncompressed newc cpio):
#   * merged-/usr skeleton (/bin,/sbin,/lib,/lib64 -> usr/...), /dev /proc /sys /tmp /root
#   * busybox (static, from busybox-static) as /usr/bin/busybox + applet symlinks
#     in /usr/bin (applets are only linked where no file exists already)
#   * /init (busybox sh script)
#   * the overlay (tar-copied on top, directory symlinks of the skeleton kept)
#   * for EVERY ELF file in the overlay: its `ldd` dependencies (including the
#     dynamic loader) copied from the HOST at the same path (host symlinks are
#     dereferenced). Libraries that ldd resolves inside the overlay are not
#     copied. For ldd, LD_LIBRARY_PATH is extended with every overlay directory
#     containing *.so* files (plus $VM_LDD_PATH if set).
#   * anything listed in $VM_EXTRA_FILES (space separated host paths), copied
#     at the same path.
#
# Output: the guest serial console is streamed to stdout. The guest prints
#   VM-EXIT-STATUS=N   after the command; the script exits with N.
# Exit codes of the script itself when no marker was seen:
#   124 = timeout, 125 = kernel panic / bochs died / no marker / set-up failed.
#
# Environment knobs:
#   VM_CACHE=dir             kernel, patched bochs-bin, work dirs
#                            (default ${XDG_CACHE_HOME:-~/.cache}/sluice/avx512_vm)
#   VM_CPU=tigerlake|corei7_icelake_u|corei7_skylake_x   (default tigerlake)
#   VM_TIMEOUT=seconds       (default 3600) hard wall-clock limit for bochs
#   VM_IPS=N                 bochs ips (virtual-clock rate only), default 100000000
#   VM_TIMESTAMPS=1          prefix each console line with host wall seconds since start
#   VM_KEEP=1                keep the work dir (bochsrc, logs, iso) and print its path
#   VM_QUIET=0               drop 'quiet' from the kernel cmdline (see boot messages)
#   VM_APPEND="..."          extra kernel cmdline arguments
set -u
KIT=${VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/avx512_vm}
die() { echo "avx512_vm.sh: ERROR: $*" >&2; exit 125; }

setup() {
    mkdir -p "$KIT" || die "cannot create $KIT"
    local pkgs="bochs bochsbios vgabios busybox-static isolinux syslinux-common genisoimage cpio"
    local missing=""
    for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    if [ -n "$missing" ]; then
        echo "avx512_vm.sh: installing$missing" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing; } \
            >"$KIT/apt.log" 2>&1 || die "apt-get install$missing failed (see $KIT/apt.log)"
    fi
    if ! ls "$KIT"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
        local img
        img=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
              awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
        [ -n "$img" ] || die "no linux-image-*-cloud-amd64 package found (apt-get update?)"
        (cd "$KIT" && apt-get download "$img" >"$KIT/apt.log" 2>&1) || die "apt-get download $img failed"
        rm -rf "$KIT/kernel"
        dpkg-deb -x "$KIT/$img"_*.deb "$KIT/kernel" || die "unpacking $img failed"
        rm -f "$KIT/$img"_*.deb
    fi
    if [ ! -x "$KIT/bochs-bin" ]; then
        cp /usr/bin/bochs-bin "$KIT/bochs-bin.tmp" || die "no /usr/bin/bochs-bin"
        python3 - "$KIT/bochs-bin.tmp" <<'PY' || die "could not patch bochs-bin (not Debian's Bochs 2.7?)"
import subprocess, sys
path = sys.argv[1]
syms = subprocess.run(["nm", "-D", path], capture_output=True, text=True, check=True).stdout
data = bytearray(open(path, "rb").read())
for name in ("KSHIFTLW_KGwKEwIbR", "KSHIFTRW_KGwKEwIbR"):
    addr = [int(l.split()[0], 16) for l in syms.splitlines() if name in l]
    assert len(addr) == 1, name
    # movzbl 0x30(%rsi),%ecx; xor %eax,%eax; cmp $0xe,%ecx  (text is mapped at offset == address)
    off = addr[0] + 6
    assert data[addr[0]:off + 3] == bytes.fromhex("0fb64e3031c083f90e"), name
    data[off + 2] = 0x0F  # cmp $0xf: counts 0..15 shift, 16.. clear
# The EVEX VPINSRB entry of BxOpcodesTable (40 bytes: two 16-byte member
# function pointers, filled by R_X86_64_RELATIVE relocations, then the operand
# bytes (type << 4 | source) and the ISA byte 0xe0). Operand 3, 0x33 (GPR16,
# r/m), becomes 0x23 (an 8-bit operand in a 32-bit GPR, as PEXTRB's): disp8 x1.
handler = [int(l.split()[0], 16) for l in syms.splitlines() if "VPINSRB_VdqHdqEbIbM" in l]
assert len(handler) == 1
relocs = subprocess.run(["readelf", "-rW", path], capture_output=True, text=True, check=True).stdout
slots = [int(p[0], 16) for p in (l.split() for l in relocs.splitlines())
         if len(p) >= 4 and p[2] == "R_X86_64_RELATIVE" and int(p[3], 16) == handler[0]]
entries = [s for s in slots if data[s + 32:s + 37] == bytes.fromhex("a2a53328e0")]  # .data: offset == address
assert len(entries) == 1, entries
data[entries[0] + 34] = 0x23
open(path, "wb").write(data)
PY
        mv "$KIT/bochs-bin.tmp" "$KIT/bochs-bin"
    fi
}
if [ "${1:-}" = --setup ]; then setup; exit 0; fi
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
setup
OVERLAY=$1
CMD=$2
MEM_MB=${3:-1024}
VM_CPU=${VM_CPU:-tigerlake}
VM_TIMEOUT=${VM_TIMEOUT:-3600}
VM_IPS=${VM_IPS:-100000000}
KIMG=$(ls "$KIT"/kernel/boot/vmlinuz-* | head -n 1)
BUSYBOX=/bin/busybox
"$BUSYBOX" --list-full >/dev/null 2>&1 || die "$BUSYBOX does not work"
! ldd "$BUSYBOX" >/dev/null 2>&1 || die "$BUSYBOX is not static (install busybox-static)"
if [ -n "$OVERLAY" ] && [ "$OVERLAY" != "-" ]; then
    [ -d "$OVERLAY" ] || die "overlay dir $OVERLAY does not exist"
    OVERLAY=$(cd "$OVERLAY" && pwd)
else
    OVERLAY=""
fi
case "$MEM_MB" in ''|*[!0-9]*) die "MEM_MB must be a number" ;; esac

mkdir -p "$KIT/runs"
W=$(mktemp -d "$KIT/runs/run.XXXXXX") || die "mktemp failed"
BOCHS_PID=""
cleanup() {
    [ -n "$BOCHS_PID" ] && kill "$BOCHS_PID" 2>/dev/null
    if [ "${VM_KEEP:-0}" = 1 ]; then echo "avx512_vm.sh: work dir kept: $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
T0=$(date +%s.%N)
el() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# ---------------------------------------------------------------- initramfs
R=$W/root
mkdir -p "$R"/usr/bin "$R"/usr/sbin "$R"/usr/lib "$R"/usr/lib64 "$R"/dev "$R"/proc "$R"/sys \
         "$R"/tmp "$R"/root "$R"/etc "$R"/mnt "$R"/run "$R"/var/tmp
ln -s usr/bin "$R"/bin; ln -s usr/sbin "$R"/sbin; ln -s usr/lib "$R"/lib; ln -s usr/lib64 "$R"/lib64
chmod 1777 "$R"/tmp "$R"/var/tmp
cp "$BUSYBOX" "$R"/usr/bin/busybox
echo 'root:x:0:0:root:/root:/bin/sh' > "$R"/etc/passwd
echo 'root:x:0:' > "$R"/etc/group

if [ -n "$OVERLAY" ]; then
    tar -C "$OVERLAY" -cf - . | tar -C "$R" --keep-directory-symlink -xf - \
        || die "copying overlay failed"
fi

# ldd dependencies of every ELF in the overlay, copied from the host
copy_host() {  # copy host file $1 to the same path in $R (dereferenced)
    local p=$1
    [ -e "$R$p" ] && return 0
    [ -e "$p" ] || { echo "avx512_vm.sh: warning: host file $p missing" >&2; return 0; }
    mkdir -p "$(dirname "$R$p")"
    cp -L "$p" "$R$p"
}
if [ -n "$OVERLAY" ]; then
    LDP=$(find "$OVERLAY" -name '*.so*' \( -type f -o -type l \) -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
    LDP="${LDP}${VM_LDD_PATH:-}"
    find "$OVERLAY" -type f -print0 | while IFS= read -r -d '' f; do
        [ "$(head -c 4 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || continue
        out=$(LD_LIBRARY_PATH="$LDP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f" 2>/dev/null) || continue
        printf '%s\n' "$out" | while read -r a b c d; do
            if [ "$b" = "=>" ]; then
                case "$c" in
                    not) echo "avx512_vm.sh: warning: ${f#$OVERLAY}: $a not found by ldd" >&2 ;;
                    /*) case "$c" in "$OVERLAY"/*) ;; *) copy_host "$c" ;; esac ;;
                esac
            else
                case "$a" in /*) case "$a" in "$OVERLAY"/*) ;; *) copy_host "$a" ;; esac ;; esac
            fi
        done
    done
fi
for p in ${VM_EXTRA_FILES:-}; do copy_host "$p"; done

# busybox applet links (do not clobber overlay/host-copied files)
for a in $("$BUSYBOX" --list-full); do
    [ -e "$R/$a" ] || [ -L "$R/$a" ] || ln -s /usr/bin/busybox "$R/usr/${a#usr/}" 2>/dev/null
done

printf '%s' "$CMD" > "$R"/.vm_cmd
cat > "$R"/init <<'EOF'
#!/usr/bin/busybox sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
/usr/bin/busybox mount -t proc proc /proc
/usr/bin/busybox mount -t sysfs sysfs /sys
/usr/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/usr/bin/busybox mount -t tmpfs -o mode=1777 tmpfs /tmp
/usr/bin/busybox mkdir -p /dev/pts /dev/shm
/usr/bin/busybox mount -t tmpfs -o mode=1777 tmpfs /dev/shm
echo "VM-START"
cd /
/usr/bin/busybox sh -c "$(/usr/bin/busybox cat /.vm_cmd)" </dev/null
rc=$?
echo
echo "VM-EXIT-STATUS=$rc"
/usr/bin/busybox sync
# let the UART drain its tty buffer before powering off (guest idle time is cheap)
/usr/bin/busybox sleep 1
/usr/bin/busybox poweroff -f
/usr/bin/busybox sleep 1000000
EOF
chmod 755 "$R"/init

(cd "$R" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 > "$W"/initrd.cpio) \
    || die "cpio failed"
ISZ=$(stat -c %s "$W"/initrd.cpio)
[ "$ISZ" -lt $(( (MEM_MB - 128) * 1024 * 1024 / 2 )) ] || \
    echo "avx512_vm.sh: warning: initramfs ${ISZ} bytes is large for ${MEM_MB} MB guest RAM (need ~2x + 128MB)" >&2

# ---------------------------------------------------------------- boot ISO
I=$W/iso
mkdir -p "$I"/isolinux
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$I"/isolinux/
cp "$KIMG" "$I"/vmlinuz
mv "$W"/initrd.cpio "$I"/initrd
QUIET=quiet; [ "${VM_QUIET:-1}" = 0 ] && QUIET=""
# lpj: skip delay-loop calibration (value only affects udelay accuracy)
# clearcpuid works around Bochs 2.7 CPUID quirks that otherwise make Linux 6.1
# disable XSAVE (=> no AVX/AVX-512 for user space) or hang:
#   xsaves,xsavec: CPUID.(0xD,1).EBX reports the standard (not compacted) size
#                  -> "XSAVE consistency problem", kernel falls back to FXSAVE.
#                  Clearing them makes the kernel use the 'standard' XSAVE format.
#   pku:           icelake/tigerlake advertise PKRU in XCR0 but CPUID.(0xD,9)=0.
#   fsrm:          Bochs' MISC_ENABLE lacks fast-strings, so the kernel clears
#                  ERMS but keeps FSRM; 6.1 memmove then corrupts memory (hang).
# (user space still sees these bits via the CPUID instruction; only the kernel
#  ignores them; AVX-512 state is fully enabled in XCR0.)
APPEND="console=ttyS0,115200 $QUIET loglevel=4 clearcpuid=xsaves,xsavec,pku,fsrm cryptomgr.notests initcall_blacklist=load_system_certificate_list mitigations=off nokaslr tsc=reliable lpj=400000 no_timer_check nowatchdog nmi_watchdog=0 panic=-1 rdinit=/init ${VM_APPEND:-}"
cat > "$I"/isolinux/isolinux.cfg <<EOF
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd
  APPEND $APPEND
EOF
genisoimage -quiet -o "$W"/boot.iso -b isolinux/isolinux.bin -c isolinux/boot.cat \
    -no-emul-boot -boot-load-size 4 -boot-info-table -R -J "$I" 2>"$W"/genisoimage.err \
    || { cat "$W"/genisoimage.err >&2; die "genisoimage failed"; }
rm -rf "$R" "$I"
echo "avx512_vm.sh: initramfs $(( ISZ / 1024 )) KiB, cpu=$VM_CPU mem=${MEM_MB}MB kernel=$(basename "$KIMG"), image built in $(el)s" >&2

# ---------------------------------------------------------------- bochs
cat > "$W"/bochsrc <<EOF
plugin_ctrl: unmapped=1, biosdev=0, speaker=0, extfpuirq=0, parallel=0, gameport=0, iodebug=0, e1000=0, ne2k=0, sb16=0, es1370=0, usb_uhci=0, usb_ohci=0, usb_ehci=0, usb_xhci=0
config_interface: textconfig
display_library: rfb, options="timeout=0, hideIPS"
memory: guest=$MEM_MB, host=$(( MEM_MB < 2048 ? MEM_MB : 2048 ))
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
cpu: model=$VM_CPU, count=1, ips=$VM_IPS, reset_on_triple_fault=0, ignore_bad_msrs=1
clock: sync=none, time0=local
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path="$W/boot.iso", status=inserted
ata1: enabled=0
boot: cdrom
floppy_bootsig_check: disabled=1
com1: enabled=1, mode=file, dev="$W/serial.log"
log: $W/bochs.log
panic: action=fatal
error: action=report
info: action=ignore
debug: action=ignore
debugger_log: -
keyboard: type=mf
vga: extension=vbe, update_freq=1
mouse: enabled=0
private_colormap: enabled=0
EOF
: > "$W"/serial.log
# Debian's bochs is built with the internal debugger, which stops at a prompt
# before the first instruction: feed it "continue" then "quit" (stdin=/dev/null
# as a final fallback makes any further prompt fail and exit).
printf 'c\nq\n' > "$W"/dbg.rc

( cd "$W" && exec timeout -k 10 "$VM_TIMEOUT" "$KIT/bochs-bin" -q -rc "$W"/dbg.rc -f "$W"/bochsrc </dev/null >"$W"/bochs.stdout 2>&1 ) &
BOCHS_PID=$!

# stream serial output (poll by byte offset); stop on marker, panic, or bochs exit
STATUS=""
REASON=""
OFF=0
PART=""
emit() {
    local l=${1%$'\r'}
    if [ "${VM_TIMESTAMPS:-0}" = 1 ]; then printf '[%7s] %s\n' "$(el)" "$l"; else printf '%s\n' "$l"; fi
    case "$l" in
        VM-EXIT-STATUS=*) STATUS=${l#VM-EXIT-STATUS=}; STATUS=${STATUS%%[!0-9]*} ;;
        *"Kernel panic - not syncing"*) REASON="kernel panic" ;;
    esac
}
while :; do
    SZ=$(stat -c %s "$W"/serial.log 2>/dev/null || echo 0)
    if [ "$SZ" -gt "$OFF" ]; then
        CHUNK=$(tail -c +$((OFF + 1)) "$W"/serial.log | head -c $((SZ - OFF)) | tr -d '\000'; echo x)
        CHUNK=${CHUNK%x}
        OFF=$SZ
        DATA=$PART$CHUNK
        while [[ "$DATA" == *$'\n'* ]]; do
            emit "${DATA%%$'\n'*}"
            DATA=${DATA#*$'\n'}
        done
        PART=$DATA
    fi
    [ -n "$STATUS" ] && break
    [ -n "$REASON" ] && { sleep 3; break; }
    kill -0 "$BOCHS_PID" 2>/dev/null || { sleep 0.2; [ "$(stat -c %s "$W"/serial.log)" -gt "$OFF" ] && continue; break; }
    sleep 0.2
done
[ -n "$PART" ] && emit "$PART"

if [ -n "$STATUS" ]; then
    # guest powers off itself; give bochs a moment, then kill it
    for _ in 1 2 3 4 5 6; do kill -0 "$BOCHS_PID" 2>/dev/null || break; sleep 0.5; done
    kill "$BOCHS_PID" 2>/dev/null; wait "$BOCHS_PID" 2>/dev/null
    BOCHS_PID=""
    echo "avx512_vm.sh: guest command exit status $STATUS, total wall $(el)s" >&2
    exit "$STATUS"
fi
kill "$BOCHS_PID" 2>/dev/null; wait "$BOCHS_PID"; BRC=$?; BOCHS_PID=""
echo "avx512_vm.sh: ERROR: no VM-EXIT-STATUS marker (${REASON:-bochs exited rc=$BRC}) after $(el)s" >&2
echo "---- tail of bochs log ($W/bochs.log):" >&2
grep -vE '^\s*$' "$W"/bochs.log 2>/dev/null | tail -n 15 >&2
tail -n 5 "$W"/bochs.stdout >&2 2>/dev/null
[ "$BRC" = 124 ] || [ "$BRC" = 137 ] && { echo "avx512_vm.sh: timed out after VM_TIMEOUT=${VM_TIMEOUT}s" >&2; exit 124; }
exit 125
