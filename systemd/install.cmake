# Install-time part of systemd/CMakeLists.txt (install(SCRIPT)): the files whose contents or
# place depend on the prefix the install uses, which `cmake --install --prefix P` and CPack
# choose after configuration. file(INSTALL) prepends $ENV{DESTDIR} and records each file in
# the install manifest.
#
# <sysconfdir> follows GNUInstallDirs: /etc for the prefixes /usr and /, <prefix>/etc otherwise.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/")
  set(paq_sysconfdir /etc)
else()
  set(paq_sysconfdir "${CMAKE_INSTALL_PREFIX}/etc")
endif()

if(PAQ_INSTALL_COMPONENT STREQUAL "config")
  file(INSTALL DESTINATION "${paq_sysconfdir}/paqd" TYPE FILE FILES "${PAQ_CONFIG_SOURCE}")
  return()
endif()

set(PAQD_EXECUTABLE "${CMAKE_INSTALL_PREFIX}/${PAQ_BINDIR}/paqd")
set(PAQD_UNIT_FILE paqd.service)
set(PAQD_UNIT_NAME paqd)
set(PAQD_UNIT_DESCRIPTION "PAQ aeronautical telemetry receiver")
set(PAQD_CONFIG_FILE "${paq_sysconfdir}/paqd/paqd.yaml")
set(PAQD_STATE_DIRECTORY paqd)
configure_file("${PAQ_SOURCE_DIR}/paqd.service.in" "${PAQ_STAGE_DIR}/paqd.service" @ONLY)

set(PAQD_UNIT_FILE paqd@.service)
set(PAQD_UNIT_NAME paqd@LINK)
set(PAQD_UNIT_DESCRIPTION "PAQ aeronautical telemetry receiver, link %i")
set(PAQD_CONFIG_FILE "${paq_sysconfdir}/paqd/%i.yaml")
set(PAQD_STATE_DIRECTORY paqd/%i)
configure_file("${PAQ_SOURCE_DIR}/paqd.service.in" "${PAQ_STAGE_DIR}/paqd@.service" @ONLY)

set(PAQD_IIO_DROPIN "${CMAKE_INSTALL_PREFIX}/${PAQ_DATADIR}/paqd/paqd-iio.conf")
configure_file("${PAQ_SOURCE_DIR}/paqd-iio.conf.in" "${PAQ_STAGE_DIR}/paqd-iio.conf" @ONLY)

file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${PAQ_SYSTEMD_UNIT_DIR}" TYPE FILE
     FILES "${PAQ_STAGE_DIR}/paqd.service" "${PAQ_STAGE_DIR}/paqd@.service")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${PAQ_DATADIR}/paqd" TYPE FILE
     FILES "${PAQ_STAGE_DIR}/paqd-iio.conf")
