#!/bin/sh
# Make a drag-to-install disk image from the PyInstaller .app bundle (macOS only: uses hdiutil).
#
#   sh packaging/macos/make_dmg.sh dist/Layerdeck.app dist/layerdeck-0.1.0-macos-arm64.dmg
#
# The image holds Layerdeck.app and a link to /Applications. The app is ad-hoc signed by
# PyInstaller, not notarized: the first start needs right-click > Open (see docs/install.md).
set -eu

APP=${1:?usage: make_dmg.sh APP_BUNDLE OUTPUT_DMG [VOLUME_NAME]}
DMG=${2:?usage: make_dmg.sh APP_BUNDLE OUTPUT_DMG [VOLUME_NAME]}
VOLNAME=${3:-Layerdeck}

[ -d "$APP" ] || { echo "make_dmg.sh: $APP is not a folder" >&2; exit 1; }
command -v hdiutil >/dev/null 2>&1 || { echo "make_dmg.sh: hdiutil not found (macOS only)" >&2; exit 1; }

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/layerdeck-dmg.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT INT TERM

cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
rm -f "$DMG"
hdiutil create -volname "$VOLNAME" -srcfolder "$STAGE" -fs HFS+ -format UDZO -ov "$DMG"
echo "$DMG"
