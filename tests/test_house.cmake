# The house rules (docs/DESIGN.md, "Folders" and "Models"), checked on the source tree by
# scripts/house.py: no function in harness/ or nets/ longer than 120 lines (house.lengths),
# no DETRAIN_TEST_ name outside the test seam (house.hooks), DESIGN quoting only paths that
# exist and naming every C file of the folders it describes (house.design), no circle in any
# folder view -- the whole house, harness/, nets/, nets/cpu/, nets/cuda/, determinism/, core/ --
# by includes or by calls of a function one other room alone defines (house.layers), every
# generated op function findable by grep and ctags at its row of nets/op_list.h
# (house.findable: the row's comment opens with dt_<name>, .ctags.d/ops.ctags tags it), every
# CUDA kernel declaring its __launch_bounds__ (house.bounds; results/cpu/ptxas). A
# negative control shows each check can fail: house.self-test measures a made-up 124-line
# function and a struct, finds a circle of calls and one of folders in a made-up tree, a row
# whose comment does not name its function and a ctags rule missing. Label tooling: the
# source tree's, not a build's -- left out of make check-asan.
foreach(check lengths hooks design layers findable bounds self-test)
  add_test(NAME house.${check} COMMAND python3 ${CMAKE_SOURCE_DIR}/scripts/house.py ${check})
  set_tests_properties(house.${check} PROPERTIES LABELS "unit;tooling")
endforeach()
# Adding an op (docs/DESIGN.md, "Adding an op"): scripts/new_op.py adds a dummy op in a copy
# of the tree through the seven files DESIGN names, builds the CPU side with this build's
# flags, runs the copy's parity cases over it, compiles its CUDA body when nvcc is here,
# checks the copy's house.py findable (grep, ctags, docs/ops.md), and fails if the op took
# more than seven files.
# Once per tree: not again in the sanitizer build (make check-asan).
if(NOT DETRAIN_SANITIZE)
  add_test(NAME house.new_op_touches_seven_files
           COMMAND python3 ${CMAKE_SOURCE_DIR}/scripts/new_op.py ${CMAKE_BINARY_DIR} --max 7)
  set_tests_properties(house.new_op_touches_seven_files PROPERTIES LABELS unit)
endif()
