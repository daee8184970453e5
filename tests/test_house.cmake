# The house rules (docs/DESIGN.md, "Folders" and "Models"), checked on the source tree by
# scripts/house.py: no function in harness/ or nets/ longer than 120 lines (house.lengths),
# no DETRAIN_TEST_ name outside the test seam (house.hooks). A negative control shows each
# check can fail: house.self-test measures a made-up 124-line function and a struct.
foreach(check lengths hooks self-test)
  add_test(NAME house.${check} COMMAND python3 ${CMAKE_SOURCE_DIR}/scripts/house.py ${check})
  set_tests_properties(house.${check} PROPERTIES LABELS unit)
endforeach()
