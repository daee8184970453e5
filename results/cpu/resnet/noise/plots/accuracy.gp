# detrain report: Test accuracy per cell (run `gnuplot accuracy.gp` in this folder)
set terminal svg noenhanced size 800,480 background rgb 'white'
set output 'accuracy.svg'
set title 'Test accuracy per cell'
set grid
set xrange [0.5:8.5]
set ylabel 'test accuracy'
set xtics rotate by -30
set key bottom right
plot 'accuracy-mean.dat' using 1:2:3:xtic(4) with yerrorbars pt 7 ps 1.5 lw 2 title 'mean +- std', 'accuracy-replicas.dat' using 1:2 with points pt 1 ps 1.5 title 'replica'
set terminal pngcairo noenhanced size 800,480
set output 'accuracy.png'
replot
unset output
