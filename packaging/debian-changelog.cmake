# Writes the package's Debian changelog (gzip -9n: changelog.gz in /usr/share/doc/<package>):
# one entry for this version, pointing to CHANGELOG.md (the user-facing history), dated by
# the last commit (or SOURCE_DATE_EPOCH), so that the same tree gives the same file.
#   cmake -DPACKAGE=paqd -DVERSION=0.1.0 -DMAINTAINER="..." -DSOURCE_DIR=... -DOUTPUT=.../changelog -P debian-changelog.cmake
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  execute_process(COMMAND date -u -R -d @$ENV{SOURCE_DATE_EPOCH} OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE)
else()
  execute_process(COMMAND git log -1 --format=%aD WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE date
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT date)
    execute_process(COMMAND date -u -R -d @0 OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
endif()
file(WRITE ${OUTPUT} "${PACKAGE} (${VERSION}) unstable; urgency=medium\n\n"
                     "  * paqd ${VERSION}: see /usr/share/doc/paqd/CHANGELOG.md for what changed.\n\n"
                     " -- ${MAINTAINER}  ${date}\n")
execute_process(COMMAND gzip -9nf ${OUTPUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${OUTPUT} failed")
endif()
