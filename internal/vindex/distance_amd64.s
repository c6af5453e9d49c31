//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 + FMA kernels of distance_amd64.go. Each keeps four 8-lane
// accumulators over 32 floats a step, then one over 8 floats a step, then
// a scalar accumulator over the last len%8 floats, and adds them in a fixed
// order: (Y0+Y1)+(Y2+Y3), the upper 128 bits onto the lower, lanes 2-3 onto
// 0-1, lane 1 onto 0, then the scalar tail. The same inputs give the same
// bits on every AVX2 + FMA processor.

// SUM4(S, P, XS, XT) leaves in XS's low lane the sum of Y0..Y3 in the order
// above: S = Y0+Y1, P = Y2+Y3, S += P, then the lanes of S onto its lowest,
// with XT (the lower half of a register other than S) as scratch. Y0..Y3
// are read only unless S or P is one of them.
#define SUM4(S, P, XS, XT) \
	VADDPS       Y1, Y0, S  \
	VADDPS       Y3, Y2, P  \
	VADDPS       P, S, S    \
	VEXTRACTF128 $1, S, XT  \
	VADDPS       XT, XS, XS \
	VMOVHLPS     XS, XS, XT \
	VADDPS       XT, XS, XS \
	VMOVSHDUP    XS, XT     \
	VADDSS       XT, XS, XS

// FINISH leaves in X0's low lane the sum of Y0..Y3 (SUM4 into Y0,
// clobbering Y1 and Y2) plus the scalar accumulator X6, and clears the
// upper halves of the Y registers.
#define FINISH \
	SUM4(Y0, Y2, X0, X1) \
	VADDSS     X6, X0, X0 \
	VZEROUPPER

// ARGS loads a's base into SI, its length into CX and b's base into DI.
#define ARGS \
	MOVQ   a_base+0(FP), SI \
	MOVQ   a_len+8(FP), CX  \
	MOVQ   b_base+24(FP), DI

// ZERO clears the accumulators Y0..Y3 and X6.
#define ZERO \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS X6, X6, X6

// L2STEP32(off) adds the squares of the differences of the 32 floats at
// off(SI) and off(DI) into Y0..Y3 (8 floats each), clobbering Y4, Y5, Y7
// and Y8. It moves neither pointer.
#define L2STEP32(off) \
	VMOVUPS     off(SI), Y4    \
	VMOVUPS     off+32(SI), Y5 \
	VMOVUPS     off+64(SI), Y7 \
	VMOVUPS     off+96(SI), Y8 \
	VSUBPS      off(DI), Y4, Y4    \
	VSUBPS      off+32(DI), Y5, Y5 \
	VSUBPS      off+64(DI), Y7, Y7 \
	VSUBPS      off+96(DI), Y8, Y8 \
	VFMADD231PS Y4, Y4, Y0 \
	VFMADD231PS Y5, Y5, Y1 \
	VFMADD231PS Y7, Y7, Y2 \
	VFMADD231PS Y8, Y8, Y3

// L2STEP8 adds the squares of the differences of the 8 floats at (SI) and
// (DI) into Y0, clobbering Y4, and moves past them (CX -= 8).
#define L2STEP8 \
	VMOVUPS     (SI), Y4     \
	VSUBPS      (DI), Y4, Y4 \
	VFMADD231PS Y4, Y4, Y0   \
	ADDQ        $32, SI      \
	ADDQ        $32, DI      \
	SUBQ        $8, CX

// L2STEP1 adds the square of the difference of the floats at (SI) and (DI)
// into X6, clobbering X4, and moves past them (CX -= 1).
#define L2STEP1 \
	VMOVSS      (SI), X4     \
	VSUBSS      (DI), X4, X4 \
	VFMADD231SS X4, X4, X6   \
	ADDQ        $4, SI       \
	ADDQ        $4, DI       \
	DECQ        CX

// func dotAVX2(a, b []float32) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	ARGS
	ZERO

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
	FINISH
	MOVSS      X0, ret+48(FP)
	RET

// func l2AVX2(a, b []float32) float32
TEXT ·l2AVX2(SB), NOSPLIT, $0-52
	ARGS
	ZERO

l232:
	CMPQ        CX, $32
	JL          l28
	L2STEP32(0)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         l232

l28:
	CMPQ        CX, $8
	JL          l2tail
	L2STEP8
	JMP         l28

l2tail:
	TESTQ       CX, CX
	JE          l2done
	L2STEP1
	JMP         l2tail

l2done:
	FINISH
	MOVSS      X0, ret+48(FP)
	RET

// func l2WithinAVX2(a, b []float32, bound float32) float32
//
// l2AVX2 that, after every 64 floats with more to come, adds up the
// accumulators (in the same order, into scratch registers) and returns that
// partial sum when it exceeds bound. A distance it runs to the end is
// l2AVX2's to the bit.
TEXT ·l2WithinAVX2(SB), NOSPLIT, $0-60
	ARGS
	MOVSS bound+48(FP), X15
	ZERO

w64:
	CMPQ        CX, $64
	JL          w32
	L2STEP32(0)
	L2STEP32(128)
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JE          wdone
	// The partial sum, as FINISH adds Y0..Y3, in X9 (Y0..Y3 kept).
	SUM4(Y9, Y10, X9, X10)
	VUCOMISS     X15, X9
	JBE          w64
	VZEROUPPER
	MOVSS        X9, ret+56(FP)
	RET

w32:
	CMPQ        CX, $32
	JL          w8
	L2STEP32(0)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX

w8:
	CMPQ        CX, $8
	JL          wtail
	L2STEP8
	JMP         w8

wtail:
	TESTQ       CX, CX
	JE          wdone
	L2STEP1
	JMP         wtail

wdone:
	FINISH
	MOVSS      X0, ret+56(FP)
	RET
