# trainpoint_module_headers(TARGET MODULE): TARGET exports the headers of runtime/MODULE, and only those,
# as "MODULE/name.h". Each module's headers sit behind an include directory of their own (a link in the
# build tree, include/MODULE/MODULE -> runtime/MODULE), so a file that includes a module its library does
# not link does not compile: the arrows of docs/architecture.md hold at build time, not only in module_rules.
function(trainpoint_module_headers target module)
  set(dir ${CMAKE_BINARY_DIR}/include/${module})
  if(NOT IS_SYMLINK ${dir}/${module})
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/runtime/${module} ${dir}/${module} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${dir})
endfunction()
