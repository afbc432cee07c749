;; A Filter plugin in WebAssembly text, speaking kube-scheduler-wasm-extension's guest ABI:
;; a node whose name ends in "0" is rejected. kubesched compiles the text itself
;; (guestURL: examples/wasm/no-zero-nodes.wat). The same logic natively is the benchmark's
;; baseline (docs/benchmarks.md, "WebAssembly plugins").
(module
  (import "k8s.io/scheduler" "currentNodeName" (func $node_name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $reason (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "node name ends in 0")
  (func (export "filter") (result i32)
    (local $len i32)
    ;; The node's name goes to offset 1024; the host returns its length.
    (local.set $len (call $node_name (i32.const 1024) (i32.const 1024)))
    (if (i32.or (i32.eqz (local.get $len)) (i32.gt_u (local.get $len) (i32.const 1024)))
      (then (return (i32.const 1)))) ;; Error: no name, or a name longer than the buffer
    (if (i32.eq (i32.load8_u (i32.add (i32.const 1023) (local.get $len))) (i32.const 48))
      (then
        (call $reason (i32.const 0) (i32.const 19))
        (return (i32.const 2)))) ;; Unschedulable
    (i32.const 0)))
