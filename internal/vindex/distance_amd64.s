//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 + FMA kernels of distance_amd64.go. Each keeps four 8-lane
// accumulators over 32 floats a step, then one over 8 floats a step, then
// a scalar accumulator over the last len%8 floats, and adds them in a fixed
// order: (Y0+Y1)+(Y2+Y3), the upper 128 bits onto the lower, lanes 2-3 onto
// 0-1, lane 1 onto 0, then the scalar tail. The same inputs give the same
// bits on every AVX2 + FMA processor.

// REDUCE leaves in X0's low lane the sum of Y0..Y3 in the order above,
// clobbering Y0..Y2. Y3 is read only.
#define REDUCE \
	VADDPS       Y1, Y0, Y0 \
	VADDPS       Y3, Y2, Y2 \
	VADDPS       Y2, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVHLPS     X0, X0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVSHDUP    X0, X1     \
	VADDSS       X1, X0, X0

// func dotAVX2(a, b []float32) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	MOVQ   a_base+0(FP), SI
	MOVQ   a_len+8(FP), CX
	MOVQ   b_base+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X6, X6, X6

dot32:
	CMPQ        CX, $32
	JL          dot8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y7
	VMOVUPS     96(SI), Y8
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y7, Y2
	VFMADD231PS 96(DI), Y8, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dot32

dot8:
	CMPQ        CX, $8
	JL          dottail
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dot8

dottail:
	TESTQ       CX, CX
	JE          dotdone
	VMOVSS      (SI), X4
	VFMADD231SS (DI), X4, X6
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         dottail

dotdone:
	REDUCE
	VADDSS     X6, X0, X0
	VZEROUPPER
	MOVSS      X0, ret+48(FP)
	RET

// func l2AVX2(a, b []float32) float32
TEXT ·l2AVX2(SB), NOSPLIT, $0-52
	MOVQ   a_base+0(FP), SI
	MOVQ   a_len+8(FP), CX
	MOVQ   b_base+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X6, X6, X6

l232:
	CMPQ        CX, $32
	JL          l28
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y7
	VMOVUPS     96(SI), Y8
	VSUBPS      (DI), Y4, Y4
	VSUBPS      32(DI), Y5, Y5
	VSUBPS      64(DI), Y7, Y7
	VSUBPS      96(DI), Y8, Y8
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y7, Y7, Y2
	VFMADD231PS Y8, Y8, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         l232

l28:
	CMPQ        CX, $8
	JL          l2tail
	VMOVUPS     (SI), Y4
	VSUBPS      (DI), Y4, Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         l28

l2tail:
	TESTQ       CX, CX
	JE          l2done
	VMOVSS      (SI), X4
	VSUBSS      (DI), X4, X4
	VFMADD231SS X4, X4, X6
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         l2tail

l2done:
	REDUCE
	VADDSS     X6, X0, X0
	VZEROUPPER
	MOVSS      X0, ret+48(FP)
	RET

// func l2WithinAVX2(a, b []float32, bound float32) float32
//
// l2AVX2 that, after every 64 floats with more to come, adds up the
// accumulators (in the same order, into scratch registers) and returns that
// partial sum when it exceeds bound. A distance it runs to the end is
// l2AVX2's to the bit.
TEXT ·l2WithinAVX2(SB), NOSPLIT, $0-60
	MOVQ   a_base+0(FP), SI
	MOVQ   a_len+8(FP), CX
	MOVQ   b_base+24(FP), DI
	MOVSS  bound+48(FP), X15
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X6, X6, X6

w64:
	CMPQ        CX, $64
	JL          w32
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y7
	VMOVUPS     96(SI), Y8
	VSUBPS      (DI), Y4, Y4
	VSUBPS      32(DI), Y5, Y5
	VSUBPS      64(DI), Y7, Y7
	VSUBPS      96(DI), Y8, Y8
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y7, Y7, Y2
	VFMADD231PS Y8, Y8, Y3
	VMOVUPS     128(SI), Y4
	VMOVUPS     160(SI), Y5
	VMOVUPS     192(SI), Y7
	VMOVUPS     224(SI), Y8
	VSUBPS      128(DI), Y4, Y4
	VSUBPS      160(DI), Y5, Y5
	VSUBPS      192(DI), Y7, Y7
	VSUBPS      224(DI), Y8, Y8
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y7, Y7, Y2
	VFMADD231PS Y8, Y8, Y3
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JE          wdone
	// The partial sum, as REDUCE adds, in Y9..Y11.
	VADDPS       Y1, Y0, Y9
	VADDPS       Y3, Y2, Y10
	VADDPS       Y10, Y9, Y9
	VEXTRACTF128 $1, Y9, X10
	VADDPS       X10, X9, X9
	VMOVHLPS     X9, X9, X10
	VADDPS       X10, X9, X9
	VMOVSHDUP    X9, X10
	VADDSS       X10, X9, X9
	VUCOMISS     X15, X9
	JBE          w64
	VZEROUPPER
	MOVSS        X9, ret+56(FP)
	RET

w32:
	CMPQ        CX, $32
	JL          w8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y7
	VMOVUPS     96(SI), Y8
	VSUBPS      (DI), Y4, Y4
	VSUBPS      32(DI), Y5, Y5
	VSUBPS      64(DI), Y7, Y7
	VSUBPS      96(DI), Y8, Y8
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y7, Y7, Y2
	VFMADD231PS Y8, Y8, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX

w8:
	CMPQ        CX, $8
	JL          wtail
	VMOVUPS     (SI), Y4
	VSUBPS      (DI), Y4, Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         w8

wtail:
	TESTQ       CX, CX
	JE          wdone
	VMOVSS      (SI), X4
	VSUBSS      (DI), X4, X4
	VFMADD231SS X4, X4, X6
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         wtail

wdone:
	REDUCE
	VADDSS     X6, X0, X0
	VZEROUPPER
	MOVSS      X0, ret+56(FP)
	RET
