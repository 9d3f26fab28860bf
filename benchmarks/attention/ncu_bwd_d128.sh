#!/bin/sh
# Nsight Compute metrics of our attention backward's main kernel (the op's
# defaults), full and causal, on one shape: run from the backward bundle
# (build_bwd_bundle.py), torch and ncu installed.
#     sh ncu_bwd_d128.sh [B H S D]        (default 4 16 4096 128)
# The second backward call's main kernel (attn_bwd_d<head dim>..., not the
# preprocess or the dQ postprocess) of profile_bwd_pair.py; the metrics of
# results/h200-bwd-ncu.txt's table, and the warp stall reasons per issued
# instruction.
B=${1:-4}; H=${2:-16}; S=${3:-4096}; D=${4:-128}
M=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,smsp__sass_inst_executed_op_shared_gmma.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_red.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
for r in long_scoreboard barrier wait gmma mio_throttle short_scoreboard math_pipe_throttle \
         dispatch_stall not_selected lg_throttle membar sleeping; do
  M=$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
for mode in full causal; do
  ncu --clock-control none --metrics "$M" -k regex:'attn_bwd_d[0-9]' --launch-skip 1 \
    --launch-count 1 python3 profile_bwd_pair.py ours "$B" "$H" "$S" "$D" $mode 2>&1 \
    | grep -v "^==PROF=="
done
