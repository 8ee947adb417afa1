# hm-xml golden tests: tests/golden/xml-<case>.in.xml against .out.txt or .err.
# HM_GOLDEN_REGENERATE=1 ctest -R xml-golden rewrites the expected files for review.
hm_add_test(xml-golden golden
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/golden/xml-golden.c
  LIBS hm-xml
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/golden)
