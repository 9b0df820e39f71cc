# Turns the templates of `mcpg new-module` (every <dir>/*.in below
# TEMPLATE_DIR) into a C file, OUTPUT, holding them as byte arrays, so the
# installed mcpg binary needs no file beside it to generate a module.
#   cmake -DTEMPLATE_DIR=... -DOUTPUT=... -P embed.cmake
file(GLOB_RECURSE templates RELATIVE "${TEMPLATE_DIR}" "${TEMPLATE_DIR}/*.in")
list(SORT templates)
set(arrays "")
set(table "")
set(i 0)
foreach(rel IN LISTS templates)
  file(READ "${TEMPLATE_DIR}/${rel}" hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR len "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "static const unsigned char template_${i}[] = {\n    ${bytes}0x00};\n")
  string(APPEND table "    {\"${rel}\", (const char *)template_${i}, ${len}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from sdk/new-module by embed.cmake: do not edit. */\n"
  "#include \"new_module.h\"\n\n${arrays}\n"
  "const new_module_template new_module_templates[] = {\n${table}    {0, 0, 0}};\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
