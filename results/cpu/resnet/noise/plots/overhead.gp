# detrain report: Cost of determinism: step time vs fast (run `gnuplot overhead.gp` in this folder)
set terminal svg noenhanced size 800,480 background rgb 'white'
set output 'overhead.svg'
set title 'Cost of determinism: step time vs fast'
set grid
set style fill solid 0.4
set boxwidth 0.6
set yrange [0:*]
set xrange [0.5:2.5]
set ylabel 'median step time / fast'
set key top left
plot 'overhead.dat' using 1:2:xtic(5) with boxes notitle, '' using 1:2:3:4 with yerrorbars pt 7 lw 2 title '95% interval', 1 with lines dt 2 lc 'black' title '1.0 = fast'
set terminal pngcairo noenhanced size 800,480
set output 'overhead.png'
replot
unset output
