// ipywidgets' HTML manager still typesets widget labels through MathJax 2's MathJax.Hub.Queue;
// the site loads MathJax 3 (deferred), so once it is there, forward such calls to MathJax 3.
document.addEventListener('DOMContentLoaded', function () {
  var mj = window.MathJax;
  if (mj && !mj.Hub) {
    mj.Hub = {Queue: function () { if (mj.typesetPromise) { mj.typesetPromise(); } }};
  }
});
