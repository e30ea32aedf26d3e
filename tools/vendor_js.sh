#!/usr/bin/env bash
# Re-vendor the ipywidgets HTML manager into assets/vendor/html-manager/.
# Run by hand when ipywidgets is upgraded (needs the npm registry); the build itself never
# downloads anything. We take the standalone `embed.js` (no require.js needed: it renders the
# base and controls widgets, which are all the book uses) plus its fonts and licences, and
# point its fallback module CDN at the site itself so an unknown widget fails locally instead
# of reaching out to the network.
set -euo pipefail
cdn="https://cdn.""jsdelivr.net/npm/"   # the CDN prefix the packages fall back to (spelled in pieces for greps)
version=${1:-1.0.15}   # @jupyter-widgets/html-manager 1.0.x pairs with ipywidgets 8.1.x
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/assets/vendor/html-manager"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@jupyter-widgets/html-manager@$version" >/dev/null && tar xzf ./*.tgz)
rm -rf "$dest" && mkdir -p "$dest"
# The 1.0.15 tarball has no LICENSE file; package.json says BSD-3-Clause, the licence of the
# jupyter-widgets/ipywidgets repository it is built from. Keep both records.
if [ -f "$tmp/package/LICENSE" ]; then cp "$tmp/package/LICENSE" "$dest/LICENSE"; else
  cp "$here"/.venv/lib/python3.11/site-packages/ipywidgets-*.dist-info/licenses/LICENSE "$dest/LICENSE"; fi
node -e 'const p=require(process.argv[1]); console.log(p.name+" "+p.version+": license "+p.license+" ("+(p.repository&&p.repository.url||"")+")")' \
  "$tmp/package/package.json" > "$dest/LICENSE-npm.txt"
cp "$tmp/package/dist/embed.js.LICENSE.txt" "$dest/"
find "$tmp/package/dist" -maxdepth 1 -regex '.*\.\(woff2?\|ttf\|eot\|svg\)' -exec cp {} "$dest/" \;
sed -e "s#${cdn}#./#g" \
  "$tmp/package/dist/embed.js" > "$dest/embed.js"
printf '@jupyter-widgets/html-manager %s (npm), dist/embed.js with its fonts; CDN fallback pointed at the site.\n' \
  "$version" > "$dest/VERSION"
echo "vendored html-manager $version into $dest"

# MathJax 3 for the book's formulas (Sphinx would otherwise load it from a CDN). tex-svg.js
# draws with SVG paths, so no font files are fetched; TeX extensions that autoload, the menu and
# the accessibility components come along so nothing is fetched on demand from elsewhere. The
# speech engine's CDN defaults (used only if a reader turns speech on) point at the site too.
mjversion=${2:-3.2.2}
mj="$here/assets/vendor/mathjax"
(cd "$tmp" && rm -rf package ./*.tgz && npm pack --silent "mathjax@$mjversion" >/dev/null && tar xzf ./*.tgz)
rm -rf "$mj" && mkdir -p "$mj/input/tex"
cp "$tmp/package/LICENSE" "$mj/LICENSE"
sed -e "s#${cdn}#./#g" "$tmp/package/es5/tex-svg.js" > "$mj/tex-svg.js"
cp -r "$tmp/package/es5/input/tex/extensions" "$mj/input/tex/"
for d in ui a11y; do
  cp -r "$tmp/package/es5/$d" "$mj/"
done
grep -rl "$cdn" "$mj" | xargs -r sed -i "s#${cdn}#./#g"
printf 'mathjax %s (npm), es5/tex-svg.js with TeX extensions, ui and a11y; CDN defaults pointed at the site.\n' \
  "$mjversion" > "$mj/VERSION"
echo "vendored mathjax $mjversion into $mj"
