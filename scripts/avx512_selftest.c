// Self-test of the emulated AVX-512 CPU (scripts/avx512_check.sh runs it in
// the guest before the kernel tests): the instruction forms that Bochs 2.7 got
// wrong and scripts/avx512_vm.sh patches, plus a few neighbours, each against
// its documented result. Exit status 0 when all agree.
//   gcc -O1 -mavx512f -mavx512bw -mavx512vl -mavx512dq avx512_selftest.c
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void Expect(const char* what, uint64_t got, uint64_t want) {
  printf("%s %-40s got %#llx want %#llx\n", got == want ? "ok  " : "FAIL", what,
         (unsigned long long)got, (unsigned long long)want);
  failures += got != want;
}

// One opmask instruction on k1 (loaded from `in`), result read back from k1.
#define MASK_OP(insn, in, want)                                                        \
  do {                                                                                 \
    uint32_t out_;                                                                     \
    __asm__ volatile("kmovd %1, %%k1\n\t" insn "\n\tkmovd %%k1, %0" : "=r"(out_)       \
                     : "r"((uint32_t)(in)) : "k1");                                    \
    Expect(insn, out_, want);                                                          \
  } while (0)

int main(void) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl")) {
    printf("FAIL this CPU lacks AVX-512 F/BW/DQ/VL\n");
    return 1;
  }
  MASK_OP("kshiftlw $15, %%k1, %%k1", 0x1, 0x8000);
  MASK_OP("kshiftrw $15, %%k1, %%k1", 0x8000, 0x1);
  MASK_OP("kshiftlw $16, %%k1, %%k1", 0x1, 0x0);
  MASK_OP("kshiftrw $10, %%k1, %%k1", 0x8000, 0x20);
  MASK_OP("kshiftlb $7, %%k1, %%k1", 0x1, 0x80);
  MASK_OP("kshiftrb $7, %%k1, %%k1", 0x180, 0x1);
  MASK_OP("kshiftld $31, %%k1, %%k1", 0x1, 0x80000000u);
  MASK_OP("kshiftrd $31, %%k1, %%k1", 0x80000000u, 0x1);

  // EVEX-only registers (xmm16+) force the EVEX encoding, whose 8-bit
  // displacement is scaled by the element size: 1 for a byte insert.
  uint8_t bytes[32], row[16], got[16];
  for (int i = 0; i < 32; ++i) bytes[i] = (uint8_t)(i * 7 + 3);
  memset(row, 0, sizeof row);
  __asm__ volatile(
      "vmovdqu8 %1, %%xmm17\n\t"
      "vpinsrb $5, 9(%2), %%xmm17, %%xmm17\n\t"
      "vpinsrb $0, 1(%2), %%xmm17, %%xmm17\n\t"
      "vmovdqu8 %%xmm17, %0"
      : "=m"(got) : "m"(row), "r"(bytes) : "xmm17");
  Expect("vpinsrb $5, 9(%r), %xmm17 (EVEX, disp8)", got[5], bytes[9]);
  Expect("vpinsrb $0, 1(%r), %xmm17 (EVEX, disp8)", got[0], bytes[1]);
  uint32_t words[8] = {0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}, dword;
  __asm__ volatile(
      "vpxord %%xmm18, %%xmm18, %%xmm18\n\t"
      "vpinsrd $2, 12(%1), %%xmm18, %%xmm18\n\t"
      "vpextrd $2, %%xmm18, %0"
      : "=r"(dword) : "r"(words) : "xmm18");
  Expect("vpinsrd $2, 12(%r), %xmm18 (EVEX, disp8)", dword, words[3]);

  printf(failures ? "avx512_selftest: %d FAILED\n" : "avx512_selftest: all passed\n", failures);
  return failures != 0;
}
