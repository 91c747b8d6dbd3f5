;; The dot product of semantic search (`dot.ts`), in WebAssembly SIMD: a float64 query with an int8 vector.
;;
;; Bit for bit the sums of the scalar loop it replaces: four accumulators, lane k summing the components
;; i = k (mod 4) in increasing i, then ((d0 + d1) + d2) + d3. Here d0 and d1 are the two lanes of $acc0 and
;; d2 and d3 those of $acc1; each int8 becomes a float64 exactly (i8 -> i16 -> i32 -> f64) and WebAssembly
;; neither fuses a multiply with an add nor reorders float operations, so every rounding is the same.
;; Components past the last whole group of four go to d0, as in the scalar loop.
;;
;; Compiled by `node scripts/wasm.mjs` into `dot-wasm.ts`; `test/conversation.dot.test.ts` checks both.
(module
  (memory (export "memory") 1)
  ;; dot($q, $b, $n): $n float64 from byte $q, $n int8 from byte $b.
  (func $dot (export "dot") (param $q i32) (param $b i32) (param $n i32) (result f64)
    (local $acc0 v128) (local $acc1 v128) (local $i i32) (local $v v128) (local $w v128) (local $x v128)
    (local $d0 f64) (local $qa i32)
    ;; Sixteen components a round: one load of int8, widened in four steps of four.
    (block $done16
      (loop $l16
        (br_if $done16 (i32.gt_s (i32.add (local.get $i) (i32.const 16)) (local.get $n)))
        (local.set $v (v128.load (i32.add (local.get $b) (local.get $i))))
        (local.set $qa (i32.add (local.get $q) (i32.shl (local.get $i) (i32.const 3))))
        (local.set $w (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $x (i32x4.extend_low_i16x8_s (local.get $w)))
        (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $x)) (v128.load offset=0 (local.get $qa)))))
        (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $x) (local.get $x))) (v128.load offset=16 (local.get $qa)))))
        (local.set $x (i32x4.extend_high_i16x8_s (local.get $w)))
        (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $x)) (v128.load offset=32 (local.get $qa)))))
        (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $x) (local.get $x))) (v128.load offset=48 (local.get $qa)))))
        (local.set $w (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $x (i32x4.extend_low_i16x8_s (local.get $w)))
        (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $x)) (v128.load offset=64 (local.get $qa)))))
        (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $x) (local.get $x))) (v128.load offset=80 (local.get $qa)))))
        (local.set $x (i32x4.extend_high_i16x8_s (local.get $w)))
        (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $x)) (v128.load offset=96 (local.get $qa)))))
        (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $x) (local.get $x))) (v128.load offset=112 (local.get $qa)))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $l16)))
    ;; Then whole groups of four.
    (block $done4
      (loop $l4
        (br_if $done4 (i32.gt_s (i32.add (local.get $i) (i32.const 4)) (local.get $n)))
        (local.set $x (i32x4.extend_low_i16x8_s (i16x8.extend_low_i8x16_s (v128.load32_zero (i32.add (local.get $b) (local.get $i))))))
        (local.set $qa (i32.add (local.get $q) (i32.shl (local.get $i) (i32.const 3))))
        (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (f64x2.convert_low_i32x4_s (local.get $x)) (v128.load offset=0 (local.get $qa)))))
        (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul (f64x2.convert_low_i32x4_s (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $x) (local.get $x))) (v128.load offset=16 (local.get $qa)))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $l4)))
    ;; The rest one at a time, into d0.
    (local.set $d0 (f64x2.extract_lane 0 (local.get $acc0)))
    (block $done1
      (loop $l1
        (br_if $done1 (i32.ge_s (local.get $i) (local.get $n)))
        (local.set $d0 (f64.add (local.get $d0) (f64.mul (f64.load (i32.add (local.get $q) (i32.shl (local.get $i) (i32.const 3)))) (f64.convert_i32_s (i32.load8_s (i32.add (local.get $b) (local.get $i)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l1)))
    (f64.add (f64.add (f64.add (local.get $d0) (f64x2.extract_lane 1 (local.get $acc0))) (f64x2.extract_lane 0 (local.get $acc1))) (f64x2.extract_lane 1 (local.get $acc1))))
  ;; scores($q, $b, $count, $dims, $out): the dot products of the query with $count vectors of $dims int8,
  ;; one after the other from byte $b, as $count float64 from byte $out (one call for a whole slot).
  (func (export "scores") (param $q i32) (param $b i32) (param $count i32) (param $dims i32) (param $out i32)
    (local $v i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_s (local.get $v) (local.get $count)))
        (f64.store (i32.add (local.get $out) (i32.shl (local.get $v) (i32.const 3)))
          (call $dot (local.get $q) (i32.add (local.get $b) (i32.mul (local.get $v) (local.get $dims))) (local.get $dims)))
        (local.set $v (i32.add (local.get $v) (i32.const 1)))
        (br $l)))))
